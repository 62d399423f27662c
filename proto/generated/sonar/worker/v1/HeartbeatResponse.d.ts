// Original file: worker.proto

import type { Long } from '@grpc/proto-loader';

export interface HeartbeatResponse {
  'server_time_unix_ms'?: (number | string | Long);
  /**
   * False when the session is unknown (coordinator restarted): the worker must call Hello again.
   */
  'session_valid'?: (boolean);
  /**
   * Jobs whose cancellation was requested: stop the engine and Complete with success=false.
   */
  'cancel_job_ids'?: (number)[];
  /**
   * Jobs whose lease this worker no longer holds: abort them without completing.
   */
  'lost_job_ids'?: (number)[];
  /**
   * New expiry of the renewed leases, by the coordinator's clock.
   */
  'lease_expires_unix_ms'?: (number | string | Long);
}

export interface HeartbeatResponse__Output {
  'server_time_unix_ms': (number);
  /**
   * False when the session is unknown (coordinator restarted): the worker must call Hello again.
   */
  'session_valid': (boolean);
  /**
   * Jobs whose cancellation was requested: stop the engine and Complete with success=false.
   */
  'cancel_job_ids': (number)[];
  /**
   * Jobs whose lease this worker no longer holds: abort them without completing.
   */
  'lost_job_ids': (number)[];
  /**
   * New expiry of the renewed leases, by the coordinator's clock.
   */
  'lease_expires_unix_ms': (number);
}
