// Original file: worker.proto

import type { LeaseRef as _sonar_worker_v1_LeaseRef, LeaseRef__Output as _sonar_worker_v1_LeaseRef__Output } from '../../../sonar/worker/v1/LeaseRef.js';
import type { Long } from '@grpc/proto-loader';

export interface MediaRequest {
  'lease'?: (_sonar_worker_v1_LeaseRef | null);
  /**
   * Resume from this byte.
   */
  'offset'?: (number | string | Long);
}

export interface MediaRequest__Output {
  'lease': (_sonar_worker_v1_LeaseRef__Output | null);
  /**
   * Resume from this byte.
   */
  'offset': (number);
}
