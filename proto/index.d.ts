import type * as grpc from '@grpc/grpc-js';
import type { WorkerServiceClient, WorkerServiceDefinition } from './generated/sonar/worker/v1/WorkerService.js';

// Every message of worker.proto in two shapes (proto-loader-gen-types): `X` is what may be sent
// (fields optional, 64-bit integers also as string or Long), `X__Output` what arrives decoded with
// WORKER_PROTO_LOADER_OPTIONS (every field present, defaults filled in, 64-bit integers as numbers).
export type * from './generated/index.js';

export declare const protoDir: string;
export declare const workerProtoPath: string;

export declare const WORKER_PROTO_LOADER_OPTIONS: Readonly<{
  keepCase: true;
  longs: NumberConstructor;
  enums: StringConstructor;
  defaults: true;
  oneofs: true;
}>;

/** WorkerService's definition, for `server.addService(workerServiceDefinition(), handlers)`. */
export declare function workerServiceDefinition(): WorkerServiceDefinition;

/** A WorkerService client (plain grpc-js client; callers add metadata and deadlines). */
export declare function createWorkerServiceClient(
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
): WorkerServiceClient;
