// Original file: worker.proto

import type { LeaseRef as _sonar_worker_v1_LeaseRef, LeaseRef__Output as _sonar_worker_v1_LeaseRef__Output } from '../../../sonar/worker/v1/LeaseRef.js';

export interface HeartbeatRequest {
  'session_id'?: (string);
  /**
   * Leases this worker is working under; each is renewed.
   */
  'leases'?: (_sonar_worker_v1_LeaseRef)[];
}

export interface HeartbeatRequest__Output {
  'session_id': (string);
  /**
   * Leases this worker is working under; each is renewed.
   */
  'leases': (_sonar_worker_v1_LeaseRef__Output)[];
}
