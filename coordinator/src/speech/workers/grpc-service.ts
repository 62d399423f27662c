import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { workerProtoPath } from '@sonar/proto';
import {
  MIN_SUPPORTED_WORKER_CONTRACT_VERSION,
  WORKER_CONTRACT_VERSION,
  WORKER_PROTO_LOADER_OPTIONS,
  isCompatibleContract,
  type HeartbeatRequestMsg,
  type HeartbeatResponseMsg,
  type HelloRequestMsg,
  type HelloResponseMsg,
} from '@sonar/shared';
import type { Logger } from 'pino';
import type { SpeechWorker } from './entities.js';
import type { WorkerRegistry } from './worker-registry.js';


export function loadWorkerService(): grpc.ServiceDefinition {
  const def = protoLoader.loadSync(workerProtoPath, WORKER_PROTO_LOADER_OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    sonar: { worker: { v1: { WorkerService: grpc.ServiceClientConstructor } } };
  };
  return pkg.sonar.worker.v1.WorkerService.service;
}

class RpcError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
  ) {
    super(message);
  }
}

/**
 * gRPC handlers of the worker protocol. Each call authenticates the worker secret from the
 * `authorization` metadata; domain failures become gRPC status codes here and nowhere else.
 */
export function workerServiceHandlers(deps: { registry: WorkerRegistry; logger: Logger; heartbeatIntervalMs: number }) {
  const { registry, logger } = deps;

  async function authenticate(call: grpc.ServerUnaryCall<unknown, unknown>): Promise<SpeechWorker> {
    const header = call.metadata.get('authorization')[0];
    const m = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    const worker = m?.[1] ? await registry.authenticate(m[1]) : null;
    if (!worker) throw new RpcError(grpc.status.UNAUTHENTICATED, 'worker secret missing, unknown or revoked');
    return worker;
  }

  function unary<Req, Res>(name: string, fn: (call: grpc.ServerUnaryCall<Req, Res>, worker: SpeechWorker) => Promise<Res>) {
    return (call: grpc.ServerUnaryCall<Req, Res>, callback: grpc.sendUnaryData<Res>) => {
      authenticate(call as grpc.ServerUnaryCall<unknown, unknown>)
        .then((worker) => fn(call, worker))
        .then(
          (res) => callback(null, res),
          (err: unknown) => {
            if (err instanceof RpcError) return callback({ code: err.code, details: err.message });
            logger.error({ err, rpc: name }, 'worker rpc failed');
            callback({ code: grpc.status.INTERNAL, details: 'internal error' });
          },
        );
    };
  }

  return {
    Hello: unary<HelloRequestMsg, HelloResponseMsg>('Hello', async (call, worker) => {
      const req = call.request;
      if (!isCompatibleContract(req.contract_version)) {
        logger.warn({ worker: worker.name, contract: req.contract_version }, 'worker refused: incompatible contract');
        throw new RpcError(
          grpc.status.FAILED_PRECONDITION,
          `worker contract version ${req.contract_version} is not supported; this coordinator accepts ` +
            `${MIN_SUPPORTED_WORKER_CONTRACT_VERSION}..${WORKER_CONTRACT_VERSION}. Upgrade the worker agent.`,
        );
      }
      const caps = req.capabilities;
      const session = await registry.hello(worker, {
        contractVersion: req.contract_version,
        agentVersion: req.agent_version,
        hostname: req.hostname,
        local: req.local,
        capabilities: {
          models: caps?.models ?? [],
          engines: caps?.engines ?? [],
          diarization: caps?.diarization ?? false,
          canFetchUrls: caps?.can_fetch_urls ?? false,
          device: caps?.device ?? 'cpu',
        },
      });
      logger.info({ worker: worker.name, session: session.sessionId, models: caps?.models, local: req.local }, 'worker hello');
      return {
        session_id: session.sessionId,
        worker_name: worker.name,
        coordinator_contract_version: WORKER_CONTRACT_VERSION,
        min_supported_contract_version: MIN_SUPPORTED_WORKER_CONTRACT_VERSION,
        heartbeat_interval_ms: deps.heartbeatIntervalMs,
        server_time_unix_ms: Date.now(),
      };
    }),
    Heartbeat: unary<HeartbeatRequestMsg, HeartbeatResponseMsg>('Heartbeat', async (call, worker) => ({
      server_time_unix_ms: Date.now(),
      session_valid: await registry.heartbeat(worker, call.request.session_id),
    })),
  };
}
