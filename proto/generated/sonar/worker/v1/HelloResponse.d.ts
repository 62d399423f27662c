// Original file: worker.proto

import type { Long } from '@grpc/proto-loader';

export interface HelloResponse {
  /**
   * Identifies this connection of the worker; echoed in Heartbeat.
   */
  'session_id'?: (string);
  'worker_name'?: (string);
  'coordinator_contract_version'?: (number);
  'min_supported_contract_version'?: (number);
  'heartbeat_interval_ms'?: (number);
  /**
   * Coordinator clock, so workers can reason about lease expiry without trusting their own clock.
   */
  'server_time_unix_ms'?: (number | string | Long);
}

export interface HelloResponse__Output {
  /**
   * Identifies this connection of the worker; echoed in Heartbeat.
   */
  'session_id': (string);
  'worker_name': (string);
  'coordinator_contract_version': (number);
  'min_supported_contract_version': (number);
  'heartbeat_interval_ms': (number);
  /**
   * Coordinator clock, so workers can reason about lease expiry without trusting their own clock.
   */
  'server_time_unix_ms': (number);
}
