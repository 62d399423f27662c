// Original file: worker.proto

import type { SpeakerTurn as _sonar_worker_v1_SpeakerTurn, SpeakerTurn__Output as _sonar_worker_v1_SpeakerTurn__Output } from '../../../sonar/worker/v1/SpeakerTurn.js';

/**
 * Speaker turns found by the worker's diarizer.
 */
export interface DiarizationResult {
  /**
   * "completed", "failed" (the diarizer ran and failed: error says why) or "unavailable" (this
   * worker cannot diarize: error says why). A failed diarization never fails the transcript.
   */
  'state'?: (string);
  'engine'?: (string);
  'speaker_count'?: (number);
  /**
   * Sorted by start; speakers numbered 0..speaker_count-1 in order of first appearance.
   */
  'turns'?: (_sonar_worker_v1_SpeakerTurn)[];
  'error'?: (string);
}

/**
 * Speaker turns found by the worker's diarizer.
 */
export interface DiarizationResult__Output {
  /**
   * "completed", "failed" (the diarizer ran and failed: error says why) or "unavailable" (this
   * worker cannot diarize: error says why). A failed diarization never fails the transcript.
   */
  'state': (string);
  'engine': (string);
  'speaker_count': (number);
  /**
   * Sorted by start; speakers numbered 0..speaker_count-1 in order of first appearance.
   */
  'turns': (_sonar_worker_v1_SpeakerTurn__Output)[];
  'error': (string);
}
