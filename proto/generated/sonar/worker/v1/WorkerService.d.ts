// Original file: worker.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { ClaimRequest as _sonar_worker_v1_ClaimRequest, ClaimRequest__Output as _sonar_worker_v1_ClaimRequest__Output } from '../../../sonar/worker/v1/ClaimRequest.js';
import type { ClaimResponse as _sonar_worker_v1_ClaimResponse, ClaimResponse__Output as _sonar_worker_v1_ClaimResponse__Output } from '../../../sonar/worker/v1/ClaimResponse.js';
import type { CompleteRequest as _sonar_worker_v1_CompleteRequest, CompleteRequest__Output as _sonar_worker_v1_CompleteRequest__Output } from '../../../sonar/worker/v1/CompleteRequest.js';
import type { CompleteResponse as _sonar_worker_v1_CompleteResponse, CompleteResponse__Output as _sonar_worker_v1_CompleteResponse__Output } from '../../../sonar/worker/v1/CompleteResponse.js';
import type { HeartbeatRequest as _sonar_worker_v1_HeartbeatRequest, HeartbeatRequest__Output as _sonar_worker_v1_HeartbeatRequest__Output } from '../../../sonar/worker/v1/HeartbeatRequest.js';
import type { HeartbeatResponse as _sonar_worker_v1_HeartbeatResponse, HeartbeatResponse__Output as _sonar_worker_v1_HeartbeatResponse__Output } from '../../../sonar/worker/v1/HeartbeatResponse.js';
import type { HelloRequest as _sonar_worker_v1_HelloRequest, HelloRequest__Output as _sonar_worker_v1_HelloRequest__Output } from '../../../sonar/worker/v1/HelloRequest.js';
import type { HelloResponse as _sonar_worker_v1_HelloResponse, HelloResponse__Output as _sonar_worker_v1_HelloResponse__Output } from '../../../sonar/worker/v1/HelloResponse.js';
import type { MediaChunk as _sonar_worker_v1_MediaChunk, MediaChunk__Output as _sonar_worker_v1_MediaChunk__Output } from '../../../sonar/worker/v1/MediaChunk.js';
import type { MediaRequest as _sonar_worker_v1_MediaRequest, MediaRequest__Output as _sonar_worker_v1_MediaRequest__Output } from '../../../sonar/worker/v1/MediaRequest.js';
import type { ProgressAck as _sonar_worker_v1_ProgressAck, ProgressAck__Output as _sonar_worker_v1_ProgressAck__Output } from '../../../sonar/worker/v1/ProgressAck.js';
import type { ProgressUpdate as _sonar_worker_v1_ProgressUpdate, ProgressUpdate__Output as _sonar_worker_v1_ProgressUpdate__Output } from '../../../sonar/worker/v1/ProgressUpdate.js';
import type { ReleaseRequest as _sonar_worker_v1_ReleaseRequest, ReleaseRequest__Output as _sonar_worker_v1_ReleaseRequest__Output } from '../../../sonar/worker/v1/ReleaseRequest.js';
import type { ReleaseResponse as _sonar_worker_v1_ReleaseResponse, ReleaseResponse__Output as _sonar_worker_v1_ReleaseResponse__Output } from '../../../sonar/worker/v1/ReleaseResponse.js';

export interface WorkerServiceClient extends grpc.Client {
  /**
   * Long poll: waits up to `wait_ms` for a job this worker may run and leases it.
   */
  Claim(argument: _sonar_worker_v1_ClaimRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ClaimResponse__Output>): grpc.ClientUnaryCall;
  Claim(argument: _sonar_worker_v1_ClaimRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_ClaimResponse__Output>): grpc.ClientUnaryCall;
  Claim(argument: _sonar_worker_v1_ClaimRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ClaimResponse__Output>): grpc.ClientUnaryCall;
  Claim(argument: _sonar_worker_v1_ClaimRequest, callback: grpc.requestCallback<_sonar_worker_v1_ClaimResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Long poll: waits up to `wait_ms` for a job this worker may run and leases it.
   */
  claim(argument: _sonar_worker_v1_ClaimRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ClaimResponse__Output>): grpc.ClientUnaryCall;
  claim(argument: _sonar_worker_v1_ClaimRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_ClaimResponse__Output>): grpc.ClientUnaryCall;
  claim(argument: _sonar_worker_v1_ClaimRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ClaimResponse__Output>): grpc.ClientUnaryCall;
  claim(argument: _sonar_worker_v1_ClaimRequest, callback: grpc.requestCallback<_sonar_worker_v1_ClaimResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Ends an attempt (success or failure). Idempotent per attempt. Contract 4: with `claim_next` it
   * also leases the worker's next job once the completion is stored (the first look of a Claim).
   */
  Complete(argument: _sonar_worker_v1_CompleteRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_CompleteResponse__Output>): grpc.ClientUnaryCall;
  Complete(argument: _sonar_worker_v1_CompleteRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_CompleteResponse__Output>): grpc.ClientUnaryCall;
  Complete(argument: _sonar_worker_v1_CompleteRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_CompleteResponse__Output>): grpc.ClientUnaryCall;
  Complete(argument: _sonar_worker_v1_CompleteRequest, callback: grpc.requestCallback<_sonar_worker_v1_CompleteResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Ends an attempt (success or failure). Idempotent per attempt. Contract 4: with `claim_next` it
   * also leases the worker's next job once the completion is stored (the first look of a Claim).
   */
  complete(argument: _sonar_worker_v1_CompleteRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_CompleteResponse__Output>): grpc.ClientUnaryCall;
  complete(argument: _sonar_worker_v1_CompleteRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_CompleteResponse__Output>): grpc.ClientUnaryCall;
  complete(argument: _sonar_worker_v1_CompleteRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_CompleteResponse__Output>): grpc.ClientUnaryCall;
  complete(argument: _sonar_worker_v1_CompleteRequest, callback: grpc.requestCallback<_sonar_worker_v1_CompleteResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Lease-bound, checksummed download of media the coordinator holds.
   */
  FetchMedia(argument: _sonar_worker_v1_MediaRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_sonar_worker_v1_MediaChunk__Output>;
  FetchMedia(argument: _sonar_worker_v1_MediaRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_sonar_worker_v1_MediaChunk__Output>;
  /**
   * Lease-bound, checksummed download of media the coordinator holds.
   */
  fetchMedia(argument: _sonar_worker_v1_MediaRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_sonar_worker_v1_MediaChunk__Output>;
  fetchMedia(argument: _sonar_worker_v1_MediaRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_sonar_worker_v1_MediaChunk__Output>;
  
  /**
   * Keeps the worker's presence fresh and renews the leases it holds; sent every
   * `heartbeat_interval_ms` from Hello. Answers with cancel requests and leases it lost.
   */
  Heartbeat(argument: _sonar_worker_v1_HeartbeatRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_HeartbeatResponse__Output>): grpc.ClientUnaryCall;
  Heartbeat(argument: _sonar_worker_v1_HeartbeatRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_HeartbeatResponse__Output>): grpc.ClientUnaryCall;
  Heartbeat(argument: _sonar_worker_v1_HeartbeatRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_HeartbeatResponse__Output>): grpc.ClientUnaryCall;
  Heartbeat(argument: _sonar_worker_v1_HeartbeatRequest, callback: grpc.requestCallback<_sonar_worker_v1_HeartbeatResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Keeps the worker's presence fresh and renews the leases it holds; sent every
   * `heartbeat_interval_ms` from Hello. Answers with cancel requests and leases it lost.
   */
  heartbeat(argument: _sonar_worker_v1_HeartbeatRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_HeartbeatResponse__Output>): grpc.ClientUnaryCall;
  heartbeat(argument: _sonar_worker_v1_HeartbeatRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_HeartbeatResponse__Output>): grpc.ClientUnaryCall;
  heartbeat(argument: _sonar_worker_v1_HeartbeatRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_HeartbeatResponse__Output>): grpc.ClientUnaryCall;
  heartbeat(argument: _sonar_worker_v1_HeartbeatRequest, callback: grpc.requestCallback<_sonar_worker_v1_HeartbeatResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Registers this process, checks the contract version, records advertised capabilities.
   */
  Hello(argument: _sonar_worker_v1_HelloRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_HelloResponse__Output>): grpc.ClientUnaryCall;
  Hello(argument: _sonar_worker_v1_HelloRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_HelloResponse__Output>): grpc.ClientUnaryCall;
  Hello(argument: _sonar_worker_v1_HelloRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_HelloResponse__Output>): grpc.ClientUnaryCall;
  Hello(argument: _sonar_worker_v1_HelloRequest, callback: grpc.requestCallback<_sonar_worker_v1_HelloResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Registers this process, checks the contract version, records advertised capabilities.
   */
  hello(argument: _sonar_worker_v1_HelloRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_HelloResponse__Output>): grpc.ClientUnaryCall;
  hello(argument: _sonar_worker_v1_HelloRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_HelloResponse__Output>): grpc.ClientUnaryCall;
  hello(argument: _sonar_worker_v1_HelloRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_HelloResponse__Output>): grpc.ClientUnaryCall;
  hello(argument: _sonar_worker_v1_HelloRequest, callback: grpc.requestCallback<_sonar_worker_v1_HelloResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Hands a job back unfinished (worker shutting down); it is queued again.
   */
  Release(argument: _sonar_worker_v1_ReleaseRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ReleaseResponse__Output>): grpc.ClientUnaryCall;
  Release(argument: _sonar_worker_v1_ReleaseRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_ReleaseResponse__Output>): grpc.ClientUnaryCall;
  Release(argument: _sonar_worker_v1_ReleaseRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ReleaseResponse__Output>): grpc.ClientUnaryCall;
  Release(argument: _sonar_worker_v1_ReleaseRequest, callback: grpc.requestCallback<_sonar_worker_v1_ReleaseResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Hands a job back unfinished (worker shutting down); it is queued again.
   */
  release(argument: _sonar_worker_v1_ReleaseRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ReleaseResponse__Output>): grpc.ClientUnaryCall;
  release(argument: _sonar_worker_v1_ReleaseRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_ReleaseResponse__Output>): grpc.ClientUnaryCall;
  release(argument: _sonar_worker_v1_ReleaseRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ReleaseResponse__Output>): grpc.ClientUnaryCall;
  release(argument: _sonar_worker_v1_ReleaseRequest, callback: grpc.requestCallback<_sonar_worker_v1_ReleaseResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * One client stream per job attempt: stage, audio position and each completed segment in order.
   * The coordinator shows segments to browsers as they arrive and writes them in batches; the
   * ProgressAck comes only once everything sent is stored. A stream that breaks before its ack may
   * have lost segments: open a new one and send the attempt's segments again (deduplicated by seq).
   */
  ReportProgress(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ProgressAck__Output>): grpc.ClientWritableStream<_sonar_worker_v1_ProgressUpdate>;
  ReportProgress(metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_ProgressAck__Output>): grpc.ClientWritableStream<_sonar_worker_v1_ProgressUpdate>;
  ReportProgress(options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ProgressAck__Output>): grpc.ClientWritableStream<_sonar_worker_v1_ProgressUpdate>;
  ReportProgress(callback: grpc.requestCallback<_sonar_worker_v1_ProgressAck__Output>): grpc.ClientWritableStream<_sonar_worker_v1_ProgressUpdate>;
  /**
   * One client stream per job attempt: stage, audio position and each completed segment in order.
   * The coordinator shows segments to browsers as they arrive and writes them in batches; the
   * ProgressAck comes only once everything sent is stored. A stream that breaks before its ack may
   * have lost segments: open a new one and send the attempt's segments again (deduplicated by seq).
   */
  reportProgress(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ProgressAck__Output>): grpc.ClientWritableStream<_sonar_worker_v1_ProgressUpdate>;
  reportProgress(metadata: grpc.Metadata, callback: grpc.requestCallback<_sonar_worker_v1_ProgressAck__Output>): grpc.ClientWritableStream<_sonar_worker_v1_ProgressUpdate>;
  reportProgress(options: grpc.CallOptions, callback: grpc.requestCallback<_sonar_worker_v1_ProgressAck__Output>): grpc.ClientWritableStream<_sonar_worker_v1_ProgressUpdate>;
  reportProgress(callback: grpc.requestCallback<_sonar_worker_v1_ProgressAck__Output>): grpc.ClientWritableStream<_sonar_worker_v1_ProgressUpdate>;
  
}

export interface WorkerServiceHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Long poll: waits up to `wait_ms` for a job this worker may run and leases it.
   */
  Claim: grpc.handleUnaryCall<_sonar_worker_v1_ClaimRequest__Output, _sonar_worker_v1_ClaimResponse>;
  
  /**
   * Ends an attempt (success or failure). Idempotent per attempt. Contract 4: with `claim_next` it
   * also leases the worker's next job once the completion is stored (the first look of a Claim).
   */
  Complete: grpc.handleUnaryCall<_sonar_worker_v1_CompleteRequest__Output, _sonar_worker_v1_CompleteResponse>;
  
  /**
   * Lease-bound, checksummed download of media the coordinator holds.
   */
  FetchMedia: grpc.handleServerStreamingCall<_sonar_worker_v1_MediaRequest__Output, _sonar_worker_v1_MediaChunk>;
  
  /**
   * Keeps the worker's presence fresh and renews the leases it holds; sent every
   * `heartbeat_interval_ms` from Hello. Answers with cancel requests and leases it lost.
   */
  Heartbeat: grpc.handleUnaryCall<_sonar_worker_v1_HeartbeatRequest__Output, _sonar_worker_v1_HeartbeatResponse>;
  
  /**
   * Registers this process, checks the contract version, records advertised capabilities.
   */
  Hello: grpc.handleUnaryCall<_sonar_worker_v1_HelloRequest__Output, _sonar_worker_v1_HelloResponse>;
  
  /**
   * Hands a job back unfinished (worker shutting down); it is queued again.
   */
  Release: grpc.handleUnaryCall<_sonar_worker_v1_ReleaseRequest__Output, _sonar_worker_v1_ReleaseResponse>;
  
  /**
   * One client stream per job attempt: stage, audio position and each completed segment in order.
   * The coordinator shows segments to browsers as they arrive and writes them in batches; the
   * ProgressAck comes only once everything sent is stored. A stream that breaks before its ack may
   * have lost segments: open a new one and send the attempt's segments again (deduplicated by seq).
   */
  ReportProgress: grpc.handleClientStreamingCall<_sonar_worker_v1_ProgressUpdate__Output, _sonar_worker_v1_ProgressAck>;
  
}

export interface WorkerServiceDefinition extends grpc.ServiceDefinition {
  Claim: MethodDefinition<_sonar_worker_v1_ClaimRequest, _sonar_worker_v1_ClaimResponse, _sonar_worker_v1_ClaimRequest__Output, _sonar_worker_v1_ClaimResponse__Output>
  Complete: MethodDefinition<_sonar_worker_v1_CompleteRequest, _sonar_worker_v1_CompleteResponse, _sonar_worker_v1_CompleteRequest__Output, _sonar_worker_v1_CompleteResponse__Output>
  FetchMedia: MethodDefinition<_sonar_worker_v1_MediaRequest, _sonar_worker_v1_MediaChunk, _sonar_worker_v1_MediaRequest__Output, _sonar_worker_v1_MediaChunk__Output>
  Heartbeat: MethodDefinition<_sonar_worker_v1_HeartbeatRequest, _sonar_worker_v1_HeartbeatResponse, _sonar_worker_v1_HeartbeatRequest__Output, _sonar_worker_v1_HeartbeatResponse__Output>
  Hello: MethodDefinition<_sonar_worker_v1_HelloRequest, _sonar_worker_v1_HelloResponse, _sonar_worker_v1_HelloRequest__Output, _sonar_worker_v1_HelloResponse__Output>
  Release: MethodDefinition<_sonar_worker_v1_ReleaseRequest, _sonar_worker_v1_ReleaseResponse, _sonar_worker_v1_ReleaseRequest__Output, _sonar_worker_v1_ReleaseResponse__Output>
  ReportProgress: MethodDefinition<_sonar_worker_v1_ProgressUpdate, _sonar_worker_v1_ProgressAck, _sonar_worker_v1_ProgressUpdate__Output, _sonar_worker_v1_ProgressAck__Output>
}
