import type { Knex } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm.js';
import type { CallbackService, TerminalStatus } from './callback-service.js';
import type { ReportMailer } from './report-mailer.js';
import { DrainLoop, drainOutbox } from '../../infra/drain-loop.js';

/** Undispatched notifications are looked for this often even when no terminal transition kicked the dispatcher. */
const POLL_MS = 5_000;
const BATCH = 100;

/**
 * The transactional outbox of terminal notifications. JobRepository writes one speech_notifications
 * row per (job, cycle) in the statement that ends the job; this dispatcher moves the rows into the
 * BullMQ queues of callbacks and reports and marks them dispatched in the same PostgreSQL
 * transaction (drainOutbox, infra/drain-loop.ts). The queue adds use deterministic BullMQ job ids,
 * so a row dispatched twice (a crash after the adds, before the commit) is still delivered once; a
 * row whose adds failed (Redis down) stays and is tried again. Any coordinator may dispatch; rows are taken with skip
 * locked, so two never take the same row.
 *
 * The notification of a completed job waits while the pass's analysis, a translation or the
 * automatic title is pending or running, at most SPEECH_AI_NOTIFY_WAIT_SECONDS after the job
 * completed (then it goes with what exists); the AI queue kicks the dispatcher whenever such work
 * ends, and the poll covers restarts. A failed job is notified at once.
 */
export class NotificationOutbox {
  private readonly loop: DrainLoop;

  constructor(private readonly deps: { orm: Orm; callbacks: CallbackService; reports: ReportMailer | null; logger: Logger; aiWaitSeconds: number }) {
    this.loop = new DrainLoop(
      () => this.drain(),
      (err: unknown) => this.deps.logger.warn({ err }, 'speech notifications not dispatched yet; will retry'),
    );
  }

  private get knex(): Knex {
    return this.deps.orm.em.getConnection().getKnex();
  }

  start(): this {
    this.loop.start(POLL_MS);
    return this;
  }

  /** Dispatches what is waiting (now, or right after the pass in progress). */
  readonly kick = () => this.loop.kick();

  /** Dispatches until nothing is waiting; returns how many rows it dispatched. */
  drain(): Promise<number> {
    return drainOutbox(this.knex, {
      table: 'speech_notifications',
      batch: BATCH,
      // A completed job's notification waits (at most aiWaitSeconds) until its analysis, translations
      // and automatic title have ended, so the callback and report carry them.
      take: async (trx, limit) =>
        (
          await trx.raw<{ rows: Array<{ id: number; job_id: number; cycle: number; status: TerminalStatus }> }>(
            `select n.id, n.job_id, n.cycle, n.status from speech_notifications n
              where n.dispatched_at is null
                and (n.status <> 'completed' or n.created_at <= now() - make_interval(secs => ?) or not exists (
                  select 1 from speech_jobs j where j.id = n.job_id
                     and (j.analysis->>'state' in ('pending', 'running') or j.auto_title->>'state' in ('pending', 'running')
                          or exists (select 1 from speech_translations t where t.job_id = j.id and t.pass = j.current_pass and t.state in ('pending', 'running')))))
              order by n.id limit ? for update of n skip locked`,
            [this.deps.aiWaitSeconds, limit],
          )
        ).rows,
      publish: async (rows) => {
        for (const r of rows) {
          await this.deps.callbacks.enqueue(r.job_id, r.cycle, r.status);
          await this.deps.reports?.enqueue(r.job_id, r.cycle, r.status);
        }
      },
    });
  }

  close() {
    return this.loop.close();
  }
}
