// @sonar/proto: the worker protocol (worker.proto), the options both sides load it with, and the
// one typed way to get its service definition (coordinator) and client class (worker agent).
// Types: index.d.ts, over the declarations proto-loader-gen-types writes to generated/
// (`npm run generate -w proto`, run by `npm run build`; checked by proto/test/generated.test.ts).
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** Absolute paths of the protocol files, so both packages load the same definition installed or not. */
export const protoDir = fileURLToPath(new URL('.', import.meta.url));
export const workerProtoPath = fileURLToPath(new URL('./worker.proto', import.meta.url));

/**
 * How both sides decode messages: snake_case names kept, 64-bit integers as numbers, enums as
 * strings, defaults filled in, virtual oneof fields. scripts/generate.mjs turns these same options
 * into proto-loader-gen-types flags, so the generated types describe exactly what arrives.
 */
export const WORKER_PROTO_LOADER_OPTIONS = Object.freeze({
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});

let loaded;

/** The `sonar.worker.v1` package, loaded once. */
function workerPackage() {
  loaded ??= grpc.loadPackageDefinition(protoLoader.loadSync(workerProtoPath, WORKER_PROTO_LOADER_OPTIONS)).sonar.worker.v1;
  return loaded;
}

/** WorkerService's definition, for `server.addService(workerServiceDefinition(), handlers)`. */
export function workerServiceDefinition() {
  return workerPackage().WorkerService.service;
}

/** A WorkerService client (plain grpc-js client; callers add metadata and deadlines). */
export function createWorkerServiceClient(address, credentials, options) {
  const WorkerService = workerPackage().WorkerService;
  return new WorkerService(address, credentials, options);
}
