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
  /**
   * Contract 4: after storing this completion, claim the next job for this worker under
   * `session_id`, by the same rules as Claim, and answer it in CompleteResponse.next. It looks once,
   * without waiting, as the first look of a Claim long poll (not again within a second of an empty
   * look by workers of the same capabilities when no news of work came since). Only a stored
   * completion claims: a refused one (stale_lease) claims nothing. A coordinator older than
   * contract 4 ignores these fields and answers no `next`.
   */
  'claim_next'?: (boolean);
  /**
   * Contract 4: the session to claim under (as ClaimRequest.session_id); only with claim_next.
   */
  'session_id'?: (string);
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
  /**
   * Contract 4: after storing this completion, claim the next job for this worker under
   * `session_id`, by the same rules as Claim, and answer it in CompleteResponse.next. It looks once,
   * without waiting, as the first look of a Claim long poll (not again within a second of an empty
   * look by workers of the same capabilities when no news of work came since). Only a stored
   * completion claims: a refused one (stale_lease) claims nothing. A coordinator older than
   * contract 4 ignores these fields and answers no `next`.
   */
  'claim_next': (boolean);
  /**
   * Contract 4: the session to claim under (as ClaimRequest.session_id); only with claim_next.
   */
  'session_id': (string);
}
