import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';

export interface GrpcServer {
  server: grpc.Server;
  health: HealthImplementation;
  port: number;
  /** Stops taking calls, lets running calls finish for up to `graceMs`, then cancels the rest. */
  close(graceMs?: number): Promise<void>;
}

/**
 * The gRPC listener that worker agents talk to. Services are added by their domains through
 * `register`; the standard grpc.health.v1 service reports SERVING until shutdown starts.
 */
export async function startGrpcServer(opts: { host: string; port: number; logger: Logger; register?: (server: grpc.Server) => void }): Promise<GrpcServer> {
  const server = new grpc.Server({
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
    // channelz (grpc-js's call and socket statistics for a channelz service) is on by default and
    // costs a tracker and counters per connection and per call; nothing here serves or reads it.
    'grpc.enable_channelz': 0,
  });
  const health = new HealthImplementation({ '': 'SERVING' });
  health.addToServer(server);
  opts.register?.(server);

  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${opts.port}`, grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    ),
  );
  opts.logger.info({ port }, 'gRPC server listening');

  return {
    server,
    health,
    port,
    async close(graceMs = 10_000) {
      health.setStatus('', 'NOT_SERVING');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
