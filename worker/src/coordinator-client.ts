import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { workerProtoPath } from '@sonar/proto';
import {
  WORKER_PROTO_LOADER_OPTIONS,
  type HeartbeatRequestMsg,
  type HeartbeatResponseMsg,
  type HelloRequestMsg,
  type HelloResponseMsg,
} from '@sonar/shared';

type Unary<Req, Res> = (req: Req, metadata: grpc.Metadata, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Res) => void) => grpc.ClientUnaryCall;

interface WorkerServiceClient extends grpc.Client {
  Hello: Unary<HelloRequestMsg, HelloResponseMsg>;
  Heartbeat: Unary<HeartbeatRequestMsg, HeartbeatResponseMsg>;
}

/** Thin promise wrapper over the generated gRPC client; every call carries the worker secret. */
export class CoordinatorClient {
  private readonly client: WorkerServiceClient;

  constructor(
    address: string,
    private readonly secret: string,
    opts: { tls?: boolean } = {},
  ) {
    const def = protoLoader.loadSync(workerProtoPath, WORKER_PROTO_LOADER_OPTIONS);
    const pkg = grpc.loadPackageDefinition(def) as unknown as {
      sonar: { worker: { v1: { WorkerService: new (addr: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => WorkerServiceClient } } };
    };
    const creds = opts.tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
    this.client = new pkg.sonar.worker.v1.WorkerService(address, creds, {
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
    });
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${this.secret}`);
    return md;
  }

  private call<Req, Res>(fn: Unary<Req, Res>, req: Req, timeoutMs: number): Promise<Res> {
    return new Promise((resolve, reject) => {
      fn.call(this.client, req, this.metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res as Res)));
    });
  }

  hello(req: HelloRequestMsg, timeoutMs = 10_000) {
    return this.call(this.client.Hello, req, timeoutMs);
  }

  heartbeat(req: HeartbeatRequestMsg, timeoutMs = 10_000) {
    return this.call(this.client.Heartbeat, req, timeoutMs);
  }

  close() {
    this.client.close();
  }
}
