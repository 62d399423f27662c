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
  /** Languages per model (ISO 639-1); a model not listed, or with none, takes any language. */
  model_languages?: Array<{ model: string; languages: string[] }>;
}

export interface HelloRequestMsg {
  contract_version: number;
  agent_version: string;
  hostname: string;
  capabilities: CapabilitiesMsg | null;
  local: boolean;
  /** Contract 2: the leases this process still works under (the others of this worker end at once). */
  held_leases?: LeaseRefMsg[];
}

export interface HelloResponseMsg {
  session_id: string;
  worker_name: string;
  coordinator_contract_version: number;
  min_supported_contract_version: number;
  heartbeat_interval_ms: number;
  server_time_unix_ms: number;
}

export interface LeaseRefMsg {
  job_id: number;
  attempt: number;
  lease_token: string;
}

export interface HeartbeatRequestMsg {
  session_id: string;
  leases?: LeaseRefMsg[];
}

export interface HeartbeatResponseMsg {
  server_time_unix_ms: number;
  session_valid: boolean;
  cancel_job_ids: number[];
  lost_job_ids: number[];
  lease_expires_unix_ms: number;
}

export interface ClaimRequestMsg {
  session_id: string;
  wait_ms: number;
}

export interface JobAssignmentMsg {
  lease: LeaseRefMsg;
  lease_expires_unix_ms: number;
  pass: number;
  model: string;
  language: string;
  source_type: 'url' | 'upload';
  source_url: string;
  media_from_coordinator: boolean;
  media_sha256: string;
  media_size_bytes: number;
  source_filename: string;
  duration_seconds: number;
  diarization: boolean;
  forced: boolean;
}

export interface ClaimResponseMsg {
  has_job: boolean;
  job: JobAssignmentMsg | null;
  server_time_unix_ms: number;
}

export interface SegmentMsg {
  seq: number;
  start: number;
  end: number;
  text: string;
}

export type ProgressStage = 'downloading' | 'transcribing' | 'finalizing';

export interface ProgressUpdateMsg {
  lease: LeaseRefMsg;
  stage: ProgressStage;
  stage_detail: string;
  audio_position_seconds: number;
  segments: SegmentMsg[];
  duration_seconds: number;
  engine: string;
  engine_model: string;
}

export interface ProgressAckMsg {
  segments_stored: number;
}

export interface CompleteRequestMsg {
  lease: LeaseRefMsg;
  success: boolean;
  error: string;
  segment_count: number;
  duration_seconds: number;
  engine: string;
  engine_model: string;
  cancelled: boolean;
}

export interface CompleteResponseMsg {
  duplicate: boolean;
  status: string;
}

export interface ReleaseRequestMsg {
  lease: LeaseRefMsg;
  reason: string;
}

export interface MediaRequestMsg {
  lease: LeaseRefMsg;
  offset: number;
}

export interface MediaChunkMsg {
  data: Buffer;
  offset: number;
  total_size: number;
  sha256: string;
}

/** Trailer carrying the machine-readable reason of a refused call. */
export const WORKER_ERROR_METADATA_KEY = 'sonar-error';
export type WorkerErrorReason = 'stale_lease' | 'session_unknown';
