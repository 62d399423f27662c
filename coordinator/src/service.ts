import { workerServiceDefinition } from '@sonar/proto';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import pino, { type Logger } from 'pino';
import { buildApp } from './app.js';
import { loggerOptions } from './http/log-redaction.js';
import type { Config } from './config.js';
import { migrate, openOrm, type Orm } from './db/orm.js';
import { startGrpcServer, type GrpcServer } from './grpc/server.js';
import { Metrics } from './http/metrics.js';
import { PgSessionStore } from './accounts/session-store.js';
import { accountMaintenanceTasks } from './accounts/maintenance-tasks.js';
import { startMaintenance } from './queue/maintenance.js';
import { logQueueErrors, watchRedis } from './infra/redis-watch.js';
import { readPlatformVersion } from './version.js';
import { WorkerRegistry } from './speech/workers/worker-registry.js';
import { workerServiceHandlers } from './speech/workers/grpc-service.js';
import { createSpeechServices, type SpeechServices } from './speech/speech-services.js';
import { speechMaintenanceTasks } from './speech/maintenance-tasks.js';
import { startSpeechNotifications, type SpeechNotifications } from './speech/notifications/index.js';
import { AiQueue } from './speech/ai/ai-queue.js';
import { ircMaintenanceTasks } from './irc/maintenance-tasks.js';
import { IrcEventStore } from './irc/event-store.js';
import { IrcLiveLogger, loadIrcLoggerConfig } from './irc/live-logger.js';

export interface RunningCoordinator {
  app: FastifyInstance;
  orm: Orm;
  redis: Redis;
  grpc: GrpcServer;
  url: string;
  grpcPort: number;
  workers: WorkerRegistry;
  speech: SpeechServices;
  /** Terminal callbacks and completion reports (BullMQ queues speech-callbacks, speech-reports). */
  notifications: SpeechNotifications;
  /** Analysis, translations and automatic titles (BullMQ queue speech-ai). */
  ai: AiQueue;
  /** The live IRC logger, when IRC_LOGGER_CONFIG names its configuration. */
  ircLogger: IrcLiveLogger | null;
  logger: Logger;
  /** Drains HTTP, gRPC and queue workers, then closes Redis and the database pool. */
  close(): Promise<void>;
}

export function connectRedis(url: string): Redis {
  // Finite retries so an outage fails requests instead of hanging them; BullMQ workers get
  // their own blocking duplicate with unlimited retries.
  return new Redis(url, { maxRetriesPerRequest: 3, connectTimeout: 5_000, enableReadyCheck: true, lazyConnect: false });
}

/** Starts a coordinator: database (with migrations), Redis, queues, HTTP and gRPC. */
export async function startCoordinator(config: Config, opts: { logger?: Logger } = {}): Promise<RunningCoordinator> {
  const logger = opts.logger ?? pino(loggerOptions(config.LOG_LEVEL));
  const version = readPlatformVersion();
  // A bad logger configuration file stops the start before anything is opened (ConfigError).
  const ircLoggerConfig = config.IRC_LOGGER_CONFIG ? loadIrcLoggerConfig(config.IRC_LOGGER_CONFIG) : null;

  if (config.DATABASE_MIGRATE_ON_START) {
    // On a connection of their own without the wait bounds: a migration may rewrite a big table.
    const migrator = await openOrm({ databaseUrl: config.DATABASE_URL, poolMax: 1, logger });
    try {
      const applied = await migrate(migrator);
      if (applied.length) logger.info({ applied }, 'database migrations applied');
    } finally {
      await migrator.close(true);
    }
  }
  const orm = await openOrm({
    databaseUrl: config.DATABASE_URL,
    poolMax: config.DATABASE_POOL_MAX,
    logger,
    migrator: false,
    waitTimeoutMs: config.DATABASE_WAIT_TIMEOUT_MS,
  });
  const cleanups: Array<() => Promise<unknown>> = [() => orm.close(true)];
  try {
    const redis = watchRedis(connectRedis(config.REDIS_URL), logger, 'main');
    cleanups.unshift(() => redis.quit());
    await redis.ping();

    const metrics = new Metrics();
    const sessions = new PgSessionStore(orm, config.SESSION_TTL_SECONDS * 1000);
    const speech = createSpeechServices({ orm, redis, config });
    cleanups.unshift(() => speech.outbound.close());
    const maintenance = await startMaintenance({
      redis,
      prefix: `${config.REDIS_KEY_PREFIX}bull`,
      logger,
      tasks: [...accountMaintenanceTasks(sessions, logger), ...speechMaintenanceTasks(speech, config, logger), ...ircMaintenanceTasks(orm, logger)],
    });
    cleanups.unshift(() => maintenance.close());
    metrics.trackQueue(maintenance.queue);
    const notifications = startSpeechNotifications({
      orm,
      repo: speech.repo,
      redis,
      config,
      logger,
      prefix: `${config.REDIS_KEY_PREFIX}bull`,
      aiProviderLabel: speech.ai?.label ?? null,
    });
    cleanups.unshift(() => notifications.close());
    for (const queue of notifications.queues) {
      metrics.trackQueue(queue);
      logQueueErrors(queue, logger, queue.name);
    }
    const ai = new AiQueue({
      orm,
      repo: speech.repo,
      redis,
      provider: speech.ai,
      logger: logger.child({ component: 'speech-ai' }),
      prefix: `${config.REDIS_KEY_PREFIX}bull`,
      concurrency: config.SPEECH_AI_CONCURRENCY,
    });
    // Closed before the notifications (cleanups run in reverse): a task's result may still release a waiting callback.
    cleanups.unshift(() => ai.close());
    ai.onSettled(() => notifications.outbox.kick());
    ai.start();
    metrics.trackQueue(ai.queue);
    logQueueErrors(ai.queue, logger, ai.queue.name);
    if (!speech.ai) logger.info('transcript analysis, translations and titles are unavailable (OPENAI_BASE_URL/OPENAI_MODEL are not set)');

    const workers = new WorkerRegistry(orm, redis, config);
    cleanups.unshift(() => workers.close()); // presence gathered since the last flush
    const app = await buildApp({ config, orm, redis, version, metrics, workers, speech, logger: { level: config.LOG_LEVEL } });
    cleanups.unshift(() => app.close());
    const grpc = await startGrpcServer({
      host: config.GRPC_HOST,
      port: config.GRPC_PORT,
      logger,
      register: (server) =>
        server.addService(
          workerServiceDefinition(),
          workerServiceHandlers({
            registry: workers,
            leases: speech.leases,
            work: speech.work,
            media: speech.media,
            stager: speech.stager,
            logger,
            heartbeatIntervalMs: config.WORKER_HEARTBEAT_INTERVAL_MS,
          }),
        ),
    });
    cleanups.unshift(() => grpc.close());
    const address = await app.listen({ host: config.HOST, port: config.PORT });
    let ircLogger: IrcLiveLogger | null = null;
    if (ircLoggerConfig) {
      const started = new IrcLiveLogger({ config: ircLoggerConfig, store: new IrcEventStore(orm), logger: logger.child({ component: 'irc-logger' }) });
      cleanups.unshift(() => started.stop());
      await started.start();
      ircLogger = started;
    }

    let closing: Promise<void> | null = null;
    return {
      app,
      orm,
      redis,
      grpc,
      url: address,
      grpcPort: grpc.port,
      workers,
      speech,
      notifications,
      ai,
      ircLogger,
      logger,
      close() {
        closing ??= (async () => {
          for (const step of cleanups) {
            await step().catch((err: unknown) => logger.error({ err }, 'shutdown step failed'));
          }
        })();
        return closing;
      },
    };
  } catch (err) {
    for (const step of cleanups) await step().catch(() => undefined);
    throw err;
  }
}
