// Original file: worker.proto

import type { LeaseRef as _sonar_worker_v1_LeaseRef, LeaseRef__Output as _sonar_worker_v1_LeaseRef__Output } from '../../../sonar/worker/v1/LeaseRef.js';
import type { SegmentMsg as _sonar_worker_v1_SegmentMsg, SegmentMsg__Output as _sonar_worker_v1_SegmentMsg__Output } from '../../../sonar/worker/v1/SegmentMsg.js';

export interface ProgressUpdate {
  'lease'?: (_sonar_worker_v1_LeaseRef | null);
  /**
   * "downloading", "transcribing" or "finalizing".
   */
  'stage'?: (string);
  'stage_detail'?: (string);
  /**
   * Latest completed audio position in seconds.
   */
  'audio_position_seconds'?: (number | string);
  'segments'?: (_sonar_worker_v1_SegmentMsg)[];
  /**
   * Known once the media is decoded; 0 when unknown.
   */
  'duration_seconds'?: (number | string);
  'engine'?: (string);
  'engine_model'?: (string);
  /**
   * Contract 3: "running" once this attempt starts diarizing (the job's diarization state follows);
   * empty otherwise.
   */
  'diarization_state'?: (string);
}

export interface ProgressUpdate__Output {
  'lease': (_sonar_worker_v1_LeaseRef__Output | null);
  /**
   * "downloading", "transcribing" or "finalizing".
   */
  'stage': (string);
  'stage_detail': (string);
  /**
   * Latest completed audio position in seconds.
   */
  'audio_position_seconds': (number);
  'segments': (_sonar_worker_v1_SegmentMsg__Output)[];
  /**
   * Known once the media is decoded; 0 when unknown.
   */
  'duration_seconds': (number);
  'engine': (string);
  'engine_model': (string);
  /**
   * Contract 3: "running" once this attempt starts diarizing (the job's diarization state follows);
   * empty otherwise.
   */
  'diarization_state': (string);
}
