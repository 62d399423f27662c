import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';

/** Closes a BullMQ worker and the blocking Redis connection it was given (a duplicate of the shared one). */
export async function closeWorker(worker: Worker | null | undefined): Promise<void> {
  if (!worker) return;
  await worker.close();
  await (worker.opts.connection as Redis).quit().catch(() => undefined);
}
