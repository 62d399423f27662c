import type { Knex } from '@mikro-orm/postgresql';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm.js';
import { DrainLoop } from '../../infra/drain-loop.js';
import { deliveryJobId, type CallbackService, type TerminalStatus } from './callback-service.js';

/** Callbacks still owed are compared with the queue this often, besides each time Redis is ready again. */
const SWEEP_MS = 60_000;
const BATCH = 500;

/**
 * Puts back the callback deliveries that Redis lost. The outbox marks a notification dispatched
 * once its delivery is in the BullMQ queue, so a Redis that comes back empty (restarted without
 * persistence, failover to a blank replica) held the only record of a delivery waiting to retry:
 * the job said `callback.status: retrying` forever and nothing was sent. PostgreSQL knows which
 * callbacks are still owed (an API job's current cycle, dispatched, neither delivered nor given
 * up); this looks each one's delivery up in the queue and queues it again when it is gone. The
 * delivery's BullMQ id is deterministic and the delivery re-reads the job's callback state before
 * sending, so coordinators sweeping at once, or a delivery that was merely slow, still send once.
 * A re-queued delivery starts a fresh series of attempts with the same X-Sonar-Delivery id (derived
 * from the job and cycle: callbackDeliveryId).
 */
export class CallbackRecovery {
  private readonly loop: DrainLoop;
  private readonly onReady = () => this.loop.kick();

  constructor(private readonly deps: { orm: Orm; redis: Redis; callbacks: CallbackService; logger: Logger }) {
    this.loop = new DrainLoop(
      () => this.sweep(),
      (err: unknown) => deps.logger.warn({ err }, 'could not compare the callbacks owed with the queue; will retry'),
    );
  }

  private get knex(): Knex {
    return this.deps.orm.em.getConnection().getKnex();
  }

  start(): this {
    this.loop.start(SWEEP_MS);
    // A connection that is ready again may be to a Redis that lost everything: look at once.
    this.deps.redis.on('ready', this.onReady);
    return this;
  }

  /** Queues again every owed callback whose delivery is missing from the queue; returns how many. */
  async sweep(): Promise<number> {
    let restored = 0;
    let after = 0;
    for (;;) {
      const { rows } = await this.knex.raw<{ rows: Array<{ job_id: number; cycle: number; status: TerminalStatus }> }>(
        `select n.job_id, n.cycle, n.status from speech_notifications n
           join speech_jobs j on j.id = n.job_id and j.callback_cycle = n.cycle
          where n.dispatched_at is not null and n.job_id > ?
            and j.queue_channel = 'api' and j.callback_url is not null and j.callback_status in ('pending', 'retrying')
          order by n.job_id limit ?`,
        [after, BATCH],
      );
      for (const r of rows) {
        const jobId = Number(r.job_id);
        const cycle = Number(r.cycle);
        if (await this.deps.callbacks.queue.getJob(deliveryJobId(jobId, cycle))) continue;
        if (await this.deps.callbacks.enqueue(jobId, cycle, r.status)) {
          restored += 1;
          this.deps.logger.warn({ job: jobId, cycle }, 'speech callback delivery was missing from the queue (Redis lost it); queued again');
        }
      }
      if (rows.length < BATCH) return restored;
      after = Number(rows.at(-1)!.job_id);
    }
  }

  async close() {
    this.deps.redis.off('ready', this.onReady);
    await this.loop.close();
  }
}
