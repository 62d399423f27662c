import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { PgSessionStore } from '../accounts/session-store.js';
import { closeWorker } from './workers.js';

export const MAINTENANCE_QUEUE = 'maintenance';

/**
 * Periodic housekeeping on BullMQ: a job scheduler enqueues each task once per interval across all
 * coordinators, and whichever coordinator's worker takes it runs it.
 */
export interface MaintenanceTask {
  name: string;
  everyMs: number;
  run(): Promise<unknown>;
}

export async function startMaintenance(opts: {
  redis: Redis;
  prefix: string;
  logger: Logger;
  sessions: PgSessionStore;
  tasks?: MaintenanceTask[];
}): Promise<{ queue: Queue; worker: Worker; close(): Promise<void> }> {
  const queue = new Queue(MAINTENANCE_QUEUE, { connection: opts.redis, prefix: opts.prefix });
  const tasks = new Map<string, MaintenanceTask>([
    [
      'purge-expired-sessions',
      {
        name: 'purge-expired-sessions',
        everyMs: 15 * 60_000,
        run: async () => {
          const removed = await opts.sessions.purgeExpired();
          if (removed) opts.logger.info({ removed }, 'expired web sessions purged');
          return { removed };
        },
      },
    ],
    ...(opts.tasks ?? []).map((t) => [t.name, t] as const),
  ]);
  for (const task of tasks.values()) {
    await queue.upsertJobScheduler(task.name, { every: task.everyMs }, { name: task.name, opts: { removeOnComplete: 100, removeOnFail: 100 } });
  }

  const worker = new Worker(
    MAINTENANCE_QUEUE,
    async (job) => {
      const task = tasks.get(job.name);
      if (!task) throw new Error(`unknown maintenance job ${job.name}`);
      return task.run();
    },
    // Workers need a connection that may block; BullMQ duplicates the shared client for it.
    { connection: opts.redis.duplicate({ maxRetriesPerRequest: null }), prefix: opts.prefix, concurrency: 2 },
  );
  worker.on('failed', (job, err) => opts.logger.error({ err, job: job?.name }, 'maintenance job failed'));

  return {
    queue,
    worker,
    async close() {
      await closeWorker(worker);
      await queue.close();
    },
  };
}
