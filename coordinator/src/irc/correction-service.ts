/**
 * Undoing imports: the batches `irc:import` records, reverting one, and deleting rows of a network
 * by channel and time. Every removal also puts back what the write path keeps beside the rows
 * (event-store.ts): the channel counters and span, the per-nick statistics, the nick links learnt
 * from NICK rows, and the leader of each netsplit burst that lost its first row.
 */
import type { Knex } from 'knex';
import type { Orm } from '../db/orm.js';
import { AppError } from '../http/errors.js';
import { Corrections, NO_FILTER, type RowFilter } from './correction-repository.js';
import { IrcEventStore, type IrcSource } from './event-store.js';
import { addDays, isValidDate } from './parsers/common.js';

export interface ImportBatch {
  id: number;
  source: IrcSource;
  network: string;
  paths: string[];
  options: Record<string, unknown>;
  started_at: string;
  finished_at: string | null;
  reverted_at: string | null;
  files: number;
  lines: number;
  inserted: number;
  unparsed: number;
  /** Rows of the batch still stored (less than `inserted` after a delete; 0 once reverted). */
  rows: number;
}

export interface RemovalResult {
  /** Rows removed (or, with dryRun, that would be). */
  deleted: number;
  channels: number;
  nicks: number;
  /** Nick links learnt from the removed NICK rows that no remaining row supports. */
  linksRemoved: number;
  dryRun: boolean;
}

export interface DeleteOptions {
  source: IrcSource;
  network: string;
  channel?: string;
  /** UTC, inclusive: `YYYY-MM-DD` (from that day's start) or `YYYY-MM-DD HH:MM:SS`. */
  from?: string;
  /** UTC, inclusive: `YYYY-MM-DD` (to that day's end) or `YYYY-MM-DD HH:MM:SS`. */
  to?: string;
  dryRun?: boolean;
}

const DATETIME = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}$/;

export class IrcCorrectionService {
  private readonly store: IrcEventStore;
  constructor(orm: Orm) {
    this.store = new IrcEventStore(orm);
  }

  private knex(): Knex {
    return this.store.knex();
  }

  /** Import batches, newest first (optionally of one network). */
  async listBatches(opts: { source?: IrcSource; network?: string } = {}): Promise<ImportBatch[]> {
    const rows = await Corrections.batches.rows(this.knex(), { source: opts.source ?? null, network: opts.network ?? null });
    return rows.map((r) => ({
      id: Number(r.id),
      source: r.source as IrcSource,
      network: String(r.network),
      paths: r.paths as string[],
      options: r.options as Record<string, unknown>,
      started_at: String(r.started_at),
      finished_at: (r.finished_at as string | null) ?? null,
      reverted_at: (r.reverted_at as string | null) ?? null,
      files: Number(r.files),
      lines: Number(r.lines),
      inserted: Number(r.inserted),
      unparsed: Number(r.unparsed),
      rows: Number(r.rows),
    }));
  }

  /** Removes every row batch `id` added, and marks the batch reverted. */
  async revertBatch(id: number, opts: { dryRun?: boolean } = {}): Promise<RemovalResult & { batch: number; network: string }> {
    const batch = await Corrections.batch.first(this.knex(), { id });
    if (!batch) throw new AppError('not_found', `no import batch ${id} (irc:imports lists them)`);
    const result = await this.remove(Number(batch.network_id), { ...NO_FILTER, batchId: id }, opts.dryRun ?? false, async (trx) => {
      await Corrections.markReverted.run(trx, { id });
    });
    return { batch: id, network: batch.name, ...result };
  }

  /** Removes the rows of a network (one channel of it, when given) between `from` and `to`. */
  async deleteRows(o: DeleteOptions): Promise<RemovalResult> {
    const networkId = (await Corrections.networkId.first(this.knex(), { source: o.source, name: o.network }))?.id;
    if (networkId === undefined) throw new AppError('not_found', `no network "${o.network}" in the ${o.source} archive`);
    const filter: RowFilter = { ...NO_FILTER };
    if (o.channel !== undefined) {
      const channelId = (await Corrections.channelId.first(this.knex(), { networkId, name: o.channel }))?.id;
      if (channelId === undefined) throw new AppError('not_found', `no channel "${o.channel}" in network "${o.network}" (${o.source})`);
      filter.channelId = channelId;
    } else {
      filter.networkId = networkId;
    }
    const from = o.from === undefined ? null : bound('from', o.from, false);
    const to = o.to === undefined ? null : bound('to', o.to, true);
    if (from && to && (to.exclusive ? from.value >= to.value : from.value > to.value))
      throw new AppError('validation_failed', `to: the range ends (${o.to}) before it starts (${o.from})`);
    if (from) filter.from = from.value;
    if (to && to.exclusive) filter.before = to.value;
    else if (to) filter.until = to.value;
    return this.remove(Number(networkId), filter, o.dryRun ?? false);
  }

  /**
   * Deletes the rows of one network matching `where` (over `irc_events e`) and repairs what was
   * kept beside them, in one transaction: counters of the channels touched are recounted, the
   * nicks touched are recomputed from their remaining rows (and dropped when none is left), the
   * term counts and rows per day of the channel-months and channel-days touched are recounted, the
   * deleted rows' word pairs are taken off the pair counts, log
   * links whose NICK rows are all gone are removed (an admin's links and removals stay), and a
   * netsplit burst that lost its leader gets its earliest remaining row as leader.
   */
  private async remove(networkId: number, where: RowFilter, dryRun: boolean, after?: (trx: Knex.Transaction) => Promise<void>): Promise<RemovalResult> {
    if (dryRun) {
      // What the removal below would do, without doing it: the nick links counted are those it
      // would delete (learnt from the log, not an admin's, and with no NICK row left outside these).
      const r = (await Corrections.preview.first(this.knex(), { ...where, network: networkId }))!;
      return { deleted: Number(r.n), channels: Number(r.channels), nicks: Number(r.nicks), linksRemoved: Number(r.links), dryRun: true };
    }
    const removed = await this.knex().transaction(async (trx) => {
      const r = (await Corrections.remove.first(trx, where))!;
      const channels = r.channels ?? [];
      const nicks = r.nicks ?? [];
      const groups = r.groups ?? [];
      const pairs = r.pairs ?? [];
      if (groups.length) await Corrections.newLeaders.run(trx, { groups, channels });
      if (channels.length) await Corrections.recountChannels.run(trx, { channels });
      if (nicks.length) await Corrections.recountNicks.run(trx, { nicks, networkId });
      const months = r.months ?? [];
      if (months.length) {
        await Corrections.dropMonths.run(trx, { months: JSON.stringify(months) });
        await Corrections.recountMonths.run(trx, { months: JSON.stringify(months) });
      }
      const days = r.days ?? [];
      if (days.length) {
        await Corrections.dropDays.run(trx, { days: JSON.stringify(days) });
        await Corrections.recountDays.run(trx, { days: JSON.stringify(days) });
      }
      let linksRemoved = 0;
      if (pairs.length) linksRemoved = await Corrections.dropLinks.run(trx, { pairs: JSON.stringify(pairs), networkId });
      await after?.(trx);
      return { deleted: Number(r.n), channels: channels.length, nicks: nicks.length, linksRemoved, dryRun: false };
    });
    this.store.archiveChanged();
    return removed;
  }
}

/** A `--from` / `--to` value as a UTC bound: a day covers the whole day. */
function bound(name: 'from' | 'to', v: string, end: boolean): { value: string; exclusive: boolean } {
  if (isValidDate(v)) return end ? { value: `${addDays(v, 1)} 00:00:00`, exclusive: true } : { value: `${v} 00:00:00`, exclusive: false };
  if (DATETIME.test(v) && isValidDate(v.slice(0, 10))) return { value: v.replace('T', ' '), exclusive: false };
  throw new AppError('validation_failed', `${name}: "${v}" is not a day (YYYY-MM-DD) or a UTC time (YYYY-MM-DD HH:MM:SS)`);
}
