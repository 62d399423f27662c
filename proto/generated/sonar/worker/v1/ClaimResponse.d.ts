// Original file: worker.proto

import type { JobAssignment as _sonar_worker_v1_JobAssignment, JobAssignment__Output as _sonar_worker_v1_JobAssignment__Output } from '../../../sonar/worker/v1/JobAssignment.js';
import type { Long } from '@grpc/proto-loader';

export interface ClaimResponse {
  'has_job'?: (boolean);
  'job'?: (_sonar_worker_v1_JobAssignment | null);
  'server_time_unix_ms'?: (number | string | Long);
}

export interface ClaimResponse__Output {
  'has_job': (boolean);
  'job': (_sonar_worker_v1_JobAssignment__Output | null);
  'server_time_unix_ms': (number);
}
