/**
 * TypeScript shapes of the messages in proto/worker.proto, as @grpc/proto-loader decodes them
 * with WORKER_PROTO_LOADER_OPTIONS (snake_case names kept, int64 as number, defaults filled).
 * Keep in step with the .proto file; the protocol tests exercise every field.
 */
export const WORKER_PROTO_LOADER_OPTIONS = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
} as const;

export const WORKER_SERVICE_NAME = 'sonar.worker.v1.WorkerService';

export interface CapabilitiesMsg {
  models: string[];
  engines: string[];
  diarization: boolean;
  can_fetch_urls: boolean;
  device: string;
}

export interface HelloRequestMsg {
  contract_version: number;
  agent_version: string;
  hostname: string;
  capabilities: CapabilitiesMsg | null;
  local: boolean;
}

export interface HelloResponseMsg {
  session_id: string;
  worker_name: string;
  coordinator_contract_version: number;
  min_supported_contract_version: number;
  heartbeat_interval_ms: number;
  server_time_unix_ms: number;
}

export interface HeartbeatRequestMsg {
  session_id: string;
}

export interface HeartbeatResponseMsg {
  server_time_unix_ms: number;
  session_valid: boolean;
}
