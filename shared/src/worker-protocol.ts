/**
 * The worker protocol's messages under the names the code base uses. The shapes are generated from
 * proto/worker.proto (@sonar/proto, proto-loader-gen-types) and are those @grpc/proto-loader decodes
 * with WORKER_PROTO_LOADER_OPTIONS: snake_case names kept, every field present with its default,
 * 64-bit integers as numbers, an absent message field as null. The one refinement: lease-bound
 * messages carry their `lease` (proto3 cannot require it); the receiving side checks that with
 * hasLease() before it uses one of these types. Sending code may use the `@sonar/proto` input
 * types instead (every field optional).
 */
import type {
  Capabilities__Output,
  ClaimRequest__Output,
  ClaimResponse__Output,
  CompleteRequest__Output,
  CompleteResponse__Output,
  DiarizationResult__Output,
  HeartbeatRequest__Output,
  HeartbeatResponse__Output,
  HelloRequest__Output,
  HelloResponse__Output,
  JobAssignment__Output,
  LeaseRef__Output,
  MediaChunk__Output,
  MediaRequest__Output,
  ModelLanguages__Output,
  ProgressAck__Output,
  ProgressUpdate__Output,
  ReleaseRequest__Output,
  SegmentMsg__Output,
  SpeakerTurn__Output,
} from '@sonar/proto';

/** A lease-bound message whose lease is there (checked with hasLease). */
export type Leased<T extends { lease: LeaseRef__Output | null }> = T & { lease: LeaseRef__Output };

/** Whether a lease-bound message carries its lease (every one must; the proto cannot say so). */
export function hasLease<T extends { lease: LeaseRef__Output | null }>(message: T): message is Leased<T> {
  return message.lease !== null && message.lease !== undefined;
}

export type CapabilitiesMsg = Capabilities__Output;
export type ModelLanguagesMsg = ModelLanguages__Output;
export type HelloRequestMsg = HelloRequest__Output;
export type HelloResponseMsg = HelloResponse__Output;
export type LeaseRefMsg = LeaseRef__Output;
export type HeartbeatRequestMsg = HeartbeatRequest__Output;
export type HeartbeatResponseMsg = HeartbeatResponse__Output;
export type ClaimRequestMsg = ClaimRequest__Output;
/** `job` is set (with its lease) when `has_job`. */
export type ClaimResponseMsg = Omit<ClaimResponse__Output, 'job'> & { job: JobAssignmentMsg | null };
export type JobAssignmentMsg = Leased<JobAssignment__Output>;
export type SegmentMsg = SegmentMsg__Output;
export type ProgressUpdateMsg = Leased<ProgressUpdate__Output>;
export type ProgressAckMsg = ProgressAck__Output;
export type CompleteRequestMsg = Leased<CompleteRequest__Output>;
/** `next` (contract 4, with CompleteRequest.claim_next): the claim made after the completion. */
export type CompleteResponseMsg = Omit<CompleteResponse__Output, 'next'> & { next: ClaimResponseMsg | null };
export type DiarizationResultMsg = DiarizationResult__Output;
export type SpeakerTurnMsg = SpeakerTurn__Output;
/** JobAssignment.task: a transcription attempt (diarized when asked) or a diarization rerun of a completed job. */
export type WorkerTask = 'transcribe' | 'diarize';
export type ReleaseRequestMsg = Leased<ReleaseRequest__Output>;
export type MediaRequestMsg = Leased<MediaRequest__Output>;
export type MediaChunkMsg = MediaChunk__Output;

/** The stages a worker reports in ProgressUpdate.stage (a string on the wire). */
export type ProgressStage = 'downloading' | 'transcribing' | 'finalizing';

/** Trailer carrying the machine-readable reason of a refused call. */
export const WORKER_ERROR_METADATA_KEY = 'sonar-error';
export type WorkerErrorReason = 'stale_lease' | 'session_unknown';
