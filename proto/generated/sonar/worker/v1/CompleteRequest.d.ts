// Original file: worker.proto

import type { LeaseRef as _sonar_worker_v1_LeaseRef, LeaseRef__Output as _sonar_worker_v1_LeaseRef__Output } from '../../../sonar/worker/v1/LeaseRef.js';
import type { DiarizationResult as _sonar_worker_v1_DiarizationResult, DiarizationResult__Output as _sonar_worker_v1_DiarizationResult__Output } from '../../../sonar/worker/v1/DiarizationResult.js';

export interface CompleteRequest {
  'lease'?: (_sonar_worker_v1_LeaseRef | null);
  'success'?: (boolean);
  /**
   * Failure reason shown to people (success=false).
   */
  'error'?: (string);
  /**
   * Number of segments sent; the coordinator checks it against what it stored.
   */
  'segment_count'?: (number);
  'duration_seconds'?: (number | string);
  'engine'?: (string);
  'engine_model'?: (string);
  /**
   * True when the failure is the requested cancellation.
   */
  'cancelled'?: (boolean);
  /**
   * Contract 3: the diarization of this attempt, when the assignment asked for one (absent: none
   * was run; the coordinator records it as unavailable).
   */
  'diarization'?: (_sonar_worker_v1_DiarizationResult | null);
}

export interface CompleteRequest__Output {
  'lease': (_sonar_worker_v1_LeaseRef__Output | null);
  'success': (boolean);
  /**
   * Failure reason shown to people (success=false).
   */
  'error': (string);
  /**
   * Number of segments sent; the coordinator checks it against what it stored.
   */
  'segment_count': (number);
  'duration_seconds': (number);
  'engine': (string);
  'engine_model': (string);
  /**
   * True when the failure is the requested cancellation.
   */
  'cancelled': (boolean);
  /**
   * Contract 3: the diarization of this attempt, when the assignment asked for one (absent: none
   * was run; the coordinator records it as unavailable).
   */
  'diarization': (_sonar_worker_v1_DiarizationResult__Output | null);
}
