// Original file: worker.proto

import type { LeaseRef as _sonar_worker_v1_LeaseRef, LeaseRef__Output as _sonar_worker_v1_LeaseRef__Output } from '../../../sonar/worker/v1/LeaseRef.js';

export interface ReleaseRequest {
  'lease'?: (_sonar_worker_v1_LeaseRef | null);
  'reason'?: (string);
}

export interface ReleaseRequest__Output {
  'lease': (_sonar_worker_v1_LeaseRef__Output | null);
  'reason': (string);
}
