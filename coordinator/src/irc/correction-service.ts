/**
 * Undoing imports: the batches `irc:import` records, reverting one, and deleting rows of a network
 * by channel and time. Every removal also puts back what the write path keeps beside the rows
 * (event-store.ts): the channel counters and span, the per-nick statistics, the nick links learnt
 * from NICK rows, and the leader of each netsplit burst that lost its first row.
 */
import type { Knex } from 'knex';
import type { Orm } from '../db/orm.js';
import { AppError } from '../http/errors.js';
import { pairsOf } from './common-terms-repository.js';
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

const STAMP = `'YYYY-MM-DD HH24:MI:SS'`;
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
    const conds: string[] = [];
    const bindings: unknown[] = [];
    if (opts.source) {
      conds.push('n.source = ?');
      bindings.push(opts.source);
    }
    if (opts.network) {
      conds.push('n.name = ?');
      bindings.push(opts.network);
    }
    const res = await this.knex().raw<{ rows: Array<Record<string, unknown>> }>(
      `select b.id, n.source, n.name as network, b.paths, b.options, to_char(b.started_at at time zone 'UTC', ${STAMP}) as started_at,
              to_char(b.finished_at at time zone 'UTC', ${STAMP}) as finished_at, to_char(b.reverted_at at time zone 'UTC', ${STAMP}) as reverted_at,
              b.files, b.lines, b.inserted, b.unparsed,
              (select count(*) from irc_events e where e.import_batch_id = b.id) as rows
         from irc_import_batches b join irc_networks n on n.id = b.network_id
        ${conds.length ? `where ${conds.join(' and ')}` : ''}
        order by b.id desc`,
      bindings,
    );
    return res.rows.map((r) => ({
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
    const res = await this.knex().raw<{ rows: Array<{ network_id: number; name: string; reverted_at: string | null }> }>(
      'select b.network_id, n.name, b.reverted_at from irc_import_batches b join irc_networks n on n.id = b.network_id where b.id = ?',
      [id],
    );
    const batch = res.rows[0];
    if (!batch) throw new AppError('not_found', `no import batch ${id} (irc:imports lists them)`);
    const result = await this.remove(Number(batch.network_id), { sql: 'e.import_batch_id = ?', bindings: [id] }, opts.dryRun ?? false, async (trx) => {
      await trx.raw('update irc_import_batches set reverted_at = coalesce(reverted_at, now()) where id = ?', [id]);
    });
    return { batch: id, network: batch.name, ...result };
  }

  /** Removes the rows of a network (one channel of it, when given) between `from` and `to`. */
  async deleteRows(o: DeleteOptions): Promise<RemovalResult> {
    const net = await this.knex().raw<{ rows: Array<{ id: number }> }>('select id from irc_networks where source = ? and name = ?', [o.source, o.network]);
    const networkId = net.rows[0]?.id;
    if (networkId === undefined) throw new AppError('not_found', `no network "${o.network}" in the ${o.source} archive`);
    const conds: string[] = [];
    const bindings: unknown[] = [];
    if (o.channel !== undefined) {
      const ch = await this.knex().raw<{ rows: Array<{ id: number }> }>('select id from irc_channels where network_id = ? and lower(name) = lower(?)', [
        networkId,
        o.channel,
      ]);
      const channelId = ch.rows[0]?.id;
      if (channelId === undefined) throw new AppError('not_found', `no channel "${o.channel}" in network "${o.network}" (${o.source})`);
      conds.push('e.channel_id = ?');
      bindings.push(channelId);
    } else {
      conds.push('e.channel_id in (select id from irc_channels where network_id = ?)');
      bindings.push(networkId);
    }
    const from = o.from === undefined ? null : bound('from', o.from, false);
    const to = o.to === undefined ? null : bound('to', o.to, true);
    if (from && to && (to.exclusive ? from.value >= to.value : from.value > to.value))
      throw new AppError('validation_failed', `to: the range ends (${o.to}) before it starts (${o.from})`);
    if (from) {
      conds.push('e.occurred_at >= ?::timestamp');
      bindings.push(from.value);
    }
    if (to) {
      conds.push(`e.occurred_at ${to.exclusive ? '<' : '<='} ?::timestamp`);
      bindings.push(to.value);
    }
    return this.remove(Number(networkId), { sql: conds.join(' and '), bindings }, o.dryRun ?? false);
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
  private async remove(
    networkId: number,
    where: { sql: string; bindings: unknown[] },
    dryRun: boolean,
    after?: (trx: Knex.Transaction) => Promise<void>,
  ): Promise<RemovalResult> {
    if (dryRun) {
      // What the removal below would do, without doing it: the nick links counted are those it
      // would delete (learnt from the log, not an admin's, and with no NICK row left outside these).
      const res = await this.knex().raw<{ rows: Array<{ n: string; channels: string; nicks: string; links: string }> }>(
        `with del as (
           select e.id, e.channel_id, lower(e.nick) as nk, lower(e.to_nick) as tk, e.event_type from irc_events e where ${where.sql}
         ), pairs as (
           select distinct least(nk, tk) as a, greatest(nk, tk) as b from del
            where event_type = 'NICK' and nk is not null and tk is not null and nk <> tk
         )
         select (select count(*) from del) as n, (select count(distinct channel_id) from del) as channels,
                (select count(distinct nk) from del where nk is not null) as nicks,
                (select count(*) from irc_nick_links l join pairs p on l.nick_key = p.a and l.other_key = p.b
                  where l.network_id = ? and l.origin = 'log' and not l.blocked
                    and not exists (
                      select 1 from irc_events e
                       where e.event_type = 'NICK' and e.channel_id in (select id from irc_channels where network_id = ?)
                         and not exists (select 1 from del where del.id = e.id)
                         and ((lower(e.nick) = p.a and lower(e.to_nick) = p.b) or (lower(e.nick) = p.b and lower(e.to_nick) = p.a)))) as links`,
        [...where.bindings, networkId, networkId],
      );
      const r = res.rows[0]!;
      return { deleted: Number(r.n), channels: Number(r.channels), nicks: Number(r.nicks), linksRemoved: Number(r.links), dryRun: true };
    }
    const removed = await this.knex().transaction(async (trx) => {
      const res = await trx.raw<{
        rows: Array<{
          n: string;
          channels: number[] | null;
          nicks: string[] | null;
          groups: string[] | null;
          pairs: Array<[string, string]> | null;
          months: Array<[number, string]> | null;
          days: Array<[number, string]> | null;
        }>;
      }>(
        `with del as (
           delete from irc_events e where ${where.sql}
           returning e.channel_id, lower(e.nick) as nk, lower(e.to_nick) as tk, e.event_type, e.netsplit_group, e.search_vector,
                     to_char(date_trunc('month', e.occurred_at), 'YYYY-MM-DD') as month, to_char(e.occurred_at, 'YYYY-MM-DD') as day
         ), pairs as (
           -- The pair counts lose the deleted rows' pairs (the list cannot change while this runs).
           update irc_term_pairs p set n = p.n - d.n
             from (select h.lexeme as common, l.lexeme as term, del.channel_id, count(*) as n ${pairsOf('del')} group by 1, 2, 3) d
            where p.common = d.common and p.term = d.term and p.channel_id = d.channel_id
         )
         select (select count(*) from del) as n,
                (select array_agg(distinct channel_id) from del) as channels,
                (select array_agg(distinct nk) from del where nk is not null) as nicks,
                (select array_agg(distinct netsplit_group) from del where netsplit_group is not null) as groups,
                (select json_agg(distinct jsonb_build_array(least(nk, tk), greatest(nk, tk)))
                   from del where event_type = 'NICK' and nk is not null and tk is not null and nk <> tk) as pairs,
                (select json_agg(distinct jsonb_build_array(channel_id, month)) from del where event_type not in ('NETSPLIT', 'NETMERGE')) as months,
                (select json_agg(distinct jsonb_build_array(channel_id, day)) from del) as days`,
        where.bindings,
      );
      const r = res.rows[0]!;
      const channels = r.channels ?? [];
      const nicks = r.nicks ?? [];
      const groups = r.groups ?? [];
      const pairs = r.pairs ?? [];
      if (groups.length) {
        await trx.raw(
          `update irc_events e set netsplit_leader = true
             from (select distinct on (netsplit_group) id, netsplit_group from irc_events
                    where netsplit_group = any(?::bigint[]) and channel_id = any(?::int[]) order by netsplit_group, occurred_at, id) f
            where e.id = f.id and not e.netsplit_leader
              and not exists (select 1 from irc_events x where x.netsplit_group = f.netsplit_group and x.channel_id = e.channel_id and x.netsplit_leader)`,
          [groups, channels],
        );
      }
      if (channels.length) {
        await trx.raw(
          `update irc_channels c set event_count = s.n, first_at = s.lo, last_at = s.hi, netsplit_count = s.ns, netsplit_leader_count = s.nl
             from (select ch.id, count(e.id) as n, min(e.occurred_at) as lo, max(e.occurred_at) as hi,
                          count(e.id) filter (where e.event_type in ('NETSPLIT', 'NETMERGE')) as ns,
                          count(e.id) filter (where e.event_type in ('NETSPLIT', 'NETMERGE') and e.netsplit_leader) as nl
                     from unnest(?::int[]) as ch(id) left join irc_events e on e.channel_id = ch.id group by ch.id) s
            where c.id = s.id`,
          [channels],
        );
      }
      if (nicks.length) {
        // The display spelling is the one seen last, as the write path keeps it.
        await trx.raw(
          `with s as (
             select lower(e.nick) as k, (array_agg(e.nick order by e.occurred_at desc, e.id desc))[1] as nick,
                    min(e.occurred_at) as lo, max(e.occurred_at) as hi,
                    max(e.occurred_at) filter (where e.event_type in ('PRIVMSG', 'ACTION')) as lm,
                    count(*) filter (where e.event_type in ('PRIVMSG', 'ACTION')) as messages, count(*) as events
               from irc_events e
              where lower(e.nick) = any(?::text[]) and e.channel_id in (select id from irc_channels where network_id = ?)
              group by 1
           ), gone as (
             delete from irc_nicks n where n.network_id = ? and n.nick_key = any(?::text[]) and not exists (select 1 from s where s.k = n.nick_key)
           )
           update irc_nicks n set nick = s.nick, first_at = s.lo, last_at = s.hi, last_message_at = s.lm, message_count = s.messages, event_count = s.events
             from s where n.network_id = ? and n.nick_key = s.k`,
          [nicks, networkId, networkId, nicks, networkId],
        );
      }
      const months = r.months ?? [];
      if (months.length) {
        // The term counts of each channel-month that lost rows, recounted from the rows left.
        const cm = `select (p->>0)::int as ch, (p->>1)::date as m from jsonb_array_elements(?::jsonb) as p`;
        await trx.raw(`delete from irc_term_months t using (${cm}) cm where t.channel_id = cm.ch and t.month = cm.m`, [JSON.stringify(months)]);
        await trx.raw(
          `insert into irc_term_months (term, channel_id, month, n, days)
           select l.lexeme, cm.ch, cm.m, count(*), bit_or(1 << (extract(day from e.occurred_at)::int - 1))
             from (${cm}) cm
             join irc_events e on e.channel_id = cm.ch and e.occurred_at >= cm.m and e.occurred_at < cm.m + interval '1 month'
             cross join lateral unnest(e.search_vector) l
            where e.event_type not in ('NETSPLIT', 'NETMERGE')
            group by 1, 2, 3`,
          [JSON.stringify(months)],
        );
      }
      const days = r.days ?? [];
      if (days.length) {
        // The rows per day of each channel-day that lost rows, recounted from the rows left.
        const cd = `select (p->>0)::int as ch, (p->>1)::date as d from jsonb_array_elements(?::jsonb) as p`;
        await trx.raw(`delete from irc_channel_days x using (${cd}) cd where x.channel_id = cd.ch and x.day = cd.d`, [JSON.stringify(days)]);
        await trx.raw(
          `insert into irc_channel_days (channel_id, day, events, messages)
           select cd.ch, cd.d, count(*), count(*) filter (where e.event_type in ('PRIVMSG', 'ACTION', 'NOTICE'))
             from (${cd}) cd join irc_events e on e.channel_id = cd.ch and e.occurred_at >= cd.d and e.occurred_at < cd.d + interval '1 day'
            group by 1, 2`,
          [JSON.stringify(days)],
        );
      }
      let linksRemoved = 0;
      if (pairs.length) {
        const del = await trx.raw<{ rows: unknown[] }>(
          `delete from irc_nick_links l
            using jsonb_array_elements(?::jsonb) as p(pair)
            where l.network_id = ? and l.nick_key = p.pair->>0 and l.other_key = p.pair->>1 and l.origin = 'log' and not l.blocked
              and not exists (
                select 1 from irc_events e
                 where e.event_type = 'NICK' and e.channel_id in (select id from irc_channels where network_id = ?)
                   and ((lower(e.nick) = p.pair->>0 and lower(e.to_nick) = p.pair->>1) or (lower(e.nick) = p.pair->>1 and lower(e.to_nick) = p.pair->>0)))
            returning l.id`,
          [JSON.stringify(pairs), networkId, networkId],
        );
        linksRemoved = del.rows.length;
      }
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
