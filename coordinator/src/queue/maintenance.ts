import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { logQueueErrors, watchRedis } from '../infra/redis-watch.js';
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
  /** Each domain's tasks (accounts/, speech/, irc/ maintenance-tasks.ts). */
  tasks: MaintenanceTask[];
  /** How often to check that every scheduler still exists in Redis (default one minute). */
  schedulerCheckMs?: number;
}): Promise<{ queue: Queue; worker: Worker; ensureSchedulers(): Promise<string[]>; close(): Promise<void> }> {
  const queue = new Queue(MAINTENANCE_QUEUE, { connection: opts.redis, prefix: opts.prefix });
  const tasks = new Map<string, MaintenanceTask>(opts.tasks.map((t) => [t.name, t] as const));
  logQueueErrors(queue, opts.logger, MAINTENANCE_QUEUE);

  // The schedulers live in Redis only. A Redis that comes back empty (no persistence, failover to
  // a replica that missed them, FLUSHALL) has none, and nothing else would ever add them again; so
  // this is the one place that puts back whichever are missing: at start, whenever the shared
  // connection becomes ready again, and on a cheap periodic check (a flush without a reconnect).
  // Upserting only missing (or re-timed) ones keeps an existing schedule's next run where it is.
  let ensuring: Promise<string[]> | null = null;
  let closed = false;
  const ensureSchedulers = (): Promise<string[]> =>
    (ensuring ??= (async () => {
      const restored: string[] = [];
      for (const task of tasks.values()) {
        if (closed) break;
        const existing = await queue.getJobScheduler(task.name);
        if (existing && Number(existing.every) === task.everyMs) continue;
        await queue.upsertJobScheduler(task.name, { every: task.everyMs }, { name: task.name, opts: { removeOnComplete: 100, removeOnFail: 100 } });
        restored.push(task.name);
      }
      return restored;
    })().finally(() => {
      ensuring = null;
    }));
  await ensureSchedulers();
  const recheck = () => {
    if (closed) return;
    ensureSchedulers().then(
      (restored) => {
        if (restored.length) opts.logger.warn({ restored }, 'maintenance job schedulers were missing in Redis; restored');
      },
      // Redis still down: the next 'ready' or check retries.
      (err: unknown) => opts.logger.warn({ err }, 'could not check the maintenance job schedulers'),
    );
  };
  opts.redis.on('ready', recheck);
  const timer = setInterval(recheck, opts.schedulerCheckMs ?? 60_000);
  timer.unref();

  const worker = new Worker(
    MAINTENANCE_QUEUE,
    async (job) => {
      const task = tasks.get(job.name);
      if (!task) throw new Error(`unknown maintenance job ${job.name}`);
      return task.run();
    },
    // Workers need a connection that may block; BullMQ duplicates the shared client for it.
    {
      connection: watchRedis(opts.redis.duplicate({ maxRetriesPerRequest: null }), opts.logger, 'maintenance-worker'),
      prefix: opts.prefix,
      concurrency: 2,
    },
  );
  worker.on('failed', (job, err) => opts.logger.error({ err, job: job?.name }, 'maintenance job failed'));
  logQueueErrors(worker, opts.logger, MAINTENANCE_QUEUE);

  return {
    queue,
    worker,
    ensureSchedulers,
    async close() {
      closed = true;
      clearInterval(timer);
      opts.redis.off('ready', recheck);
      await ensuring?.catch(() => undefined);
      await closeWorker(worker);
      await queue.close();
    },
  };
}
