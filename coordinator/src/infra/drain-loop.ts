import type { Knex } from '@mikro-orm/postgresql';
import { markDispatched } from './outbox-repository.js';

/**
 * Runs an outbox's drain one pass at a time: `kick()` starts a pass, or, while one runs, asks for
 * exactly one more right after it (so a row written during a pass is never left behind); a timer
 * kicks it every `pollMs` as well (rows another coordinator wrote, or a pass that failed). A failed
 * pass is logged and retried on the next kick. Shared by the notification outbox and the AI task
 * outbox, whose passes are drainOutbox.
 */
export class DrainLoop {
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly drain: () => Promise<unknown>,
    private readonly onError: (err: unknown) => void,
  ) {}

  start(pollMs: number) {
    this.timer = setInterval(this.kick, pollMs);
    this.timer.unref();
    this.kick();
  }

  get isClosed() {
    return this.closed;
  }

  readonly kick = () => {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain()
      .then(() => undefined)
      .catch(this.onError)
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  };

  /** No more passes; waits for the one in progress. */
  async close() {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}

/** A transactional outbox table: rows written in the statement that makes the work due, handed on by drainOutbox. */
export interface Outbox<R extends { id: number }> {
  /** The table; its rows have `id` and `dispatched_at` (null until handed on). */
  table: string;
  /** Rows per transaction; a pass goes on while a batch comes back full. */
  batch: number;
  /** Up to `limit` rows due now, locked `for update skip locked` so no two coordinators take the same row. */
  take(trx: Knex.Transaction, limit: number): Promise<R[]>;
  /**
   * Hands the rows on, inside the transaction. The queue adds use deterministic BullMQ job ids, so
   * a row handed on twice (a crash after the adds, before the commit) is still queued once; a
   * failure (Redis down) rolls back and leaves the rows for the next pass.
   */
  publish(rows: R[]): Promise<void>;
}

/**
 * One pass over an outbox: batches of due rows are taken, handed on and marked dispatched in one
 * PostgreSQL transaction each, until a batch comes back short. Returns how many rows it handed on.
 */
export async function drainOutbox<R extends { id: number }>(knex: Knex, outbox: Outbox<R>): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await knex.transaction(async (trx) => {
      const rows = await outbox.take(trx, outbox.batch);
      if (!rows.length) return 0;
      await outbox.publish(rows);
      await markDispatched(
        trx,
        outbox.table,
        rows.map((r) => r.id),
      );
      return rows.length;
    });
    total += n;
    if (n < outbox.batch) return total;
  }
}
