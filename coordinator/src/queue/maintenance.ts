import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { PgSessionStore } from '../accounts/session-store.js';

export const MAINTENANCE_QUEUE = 'maintenance';

/**
 * Periodic housekeeping on BullMQ: a job scheduler enqueues each task once per interval across all
 * coordinators, and whichever coordinator's worker takes it runs it.
 */
export async function startMaintenance(opts: {
  redis: Redis;
  prefix: string;
  logger: Logger;
  sessions: PgSessionStore;
}): Promise<{ queue: Queue; worker: Worker; close(): Promise<void> }> {
  const queue = new Queue(MAINTENANCE_QUEUE, { connection: opts.redis, prefix: opts.prefix });
  await queue.upsertJobScheduler('purge-expired-sessions', { every: 15 * 60_000 }, { name: 'purge-expired-sessions' });

  const worker = new Worker(
    MAINTENANCE_QUEUE,
    async (job) => {
      switch (job.name) {
        case 'purge-expired-sessions': {
          const removed = await opts.sessions.purgeExpired();
          opts.logger.info({ removed }, 'expired web sessions purged');
          return { removed };
        }
        default:
          throw new Error(`unknown maintenance job ${job.name}`);
      }
    },
    // Workers need a connection that may block; BullMQ duplicates the shared client for it.
    { connection: opts.redis.duplicate({ maxRetriesPerRequest: null }), prefix: opts.prefix, concurrency: 1 },
  );
  worker.on('failed', (job, err) => opts.logger.error({ err, job: job?.name }, 'maintenance job failed'));

  return {
    queue,
    worker,
    async close() {
      await worker.close();
      await (worker.opts.connection as Redis).quit().catch(() => undefined);
      await queue.close();
    },
  };
}
