import type { Knex } from 'knex';
import type { Orm } from '../db/orm.js';
import { IrcArchiveChanges } from './archive-changes.js';
import { pairsOf } from './common-terms-repository.js';
import { isChannelName } from './parsers/common.js';
import type { IrcEventType } from './parsers/types.js';

export const IRC_SOURCES = ['production', 'sandbox'] as const;
export type IrcSource = (typeof IRC_SOURCES)[number];
/**
 * The archive `/irc/api` reads when a request names no `source`, and the only one the public
 * reader pages (`/irc`) and the dashboard show: `sandbox` is for trying imports out.
 */
export const DEFAULT_IRC_SOURCE: IrcSource = 'production';

/** A row ready to be written; `occurredAt` is UTC `YYYY-MM-DD HH:MM:SS[.fff]`. */
export interface NewIrcEvent {
  eventType: IrcEventType;
  occurredAt: string;
  nick: string | null;
  messageText: string | null;
  target: string | null;
  toNick: string | null;
  /** Decimal string id shared by the rows of one netsplit (or merge) burst. */
  netsplitGroup: string | null;
  /** The first row of its burst: the one `bulk_netsplit` shows. */
  netsplitLeader: boolean;
  /** Idempotency key within the channel: a row with a key already stored is not written again. */
  lineHash: Buffer;
}

const COLUMNS = 11;

/** Per-nick statistics of the rows one batch added (aggregated in SQL, merged across batches here). */
interface NickStat {
  k: string;
  nick: string;
  first_at: string;
  last_at: string;
  last_message_at: string | null;
  messages: number;
  events: number;
}

/**
 * The one writer of chat-log rows, used by the file importer and the live logger. Each batch
 * keeps the channel's counters and span, the per-term monthly counts (irc_term_months), the counts
 * of frequent terms met with the archive's common terms (irc_term_pairs) and the rows per channel and
 * day (irc_channel_days) in step with the rows it actually added, in the same statement. The network-wide rows (per-nick statistics, nick links from NICK events) are written
 * once per `insert` transaction, after its batches, in key order: two channels imported side by
 * side then only wait for each other there, never hold each other's nick rows crosswise.
 *
 * Every write that can change what a search answers reports itself once committed through
 * `archiveChanged()` (the other writers of the archive's tables, corrections, the alias table and
 * the common-terms refresh, call it too), so cached answers (IrcSearchCache) are dropped here at
 * once and on the other coordinators over Redis.
 */
export class IrcEventStore {
  constructor(private readonly orm: Orm) {}

  knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  /** A write to the archive committed: cached search answers are out of date (see IrcArchiveChanges). */
  archiveChanged(): void {
    IrcArchiveChanges.of(this.orm).changed();
  }

  async ensureNetwork(source: IrcSource, name: string): Promise<number> {
    const res = await this.knex().raw<{ rows: Array<{ id: number; added: boolean }> }>(
      `insert into irc_networks (source, name) values (?, ?) on conflict (source, name) do update set name = excluded.name returning id, (xmax = 0) as added`,
      [source, name],
    );
    if (res.rows[0]!.added) this.archiveChanged();
    return Number(res.rows[0]!.id);
  }

  /** The network's id, or null when it does not exist (dry runs create nothing). */
  async findNetwork(source: IrcSource, name: string): Promise<number | null> {
    const res = await this.knex().raw<{ rows: Array<{ id: number }> }>('select id from irc_networks where source = ? and name = ?', [source, name]);
    return res.rows[0] ? Number(res.rows[0].id) : null;
  }

  async findChannel(networkId: number, name: string): Promise<number | null> {
    const res = await this.knex().raw<{ rows: Array<{ id: number }> }>('select id from irc_channels where network_id = ? and name = ?', [networkId, name]);
    return res.rows[0] ? Number(res.rows[0].id) : null;
  }

  /** Which of these idempotency keys the channel already holds (hex). */
  async storedHashes(channelId: number, hashes: Buffer[]): Promise<Set<string>> {
    if (!hashes.length) return new Set();
    const res = await this.knex().raw<{ rows: Array<{ h: string }> }>(
      `select encode(line_hash, 'hex') as h from irc_events where channel_id = ? and line_hash = any(?::bytea[])`,
      [channelId, hashes],
    );
    return new Set(res.rows.map((r) => r.h));
  }

  /** Records an import run; its id goes on every row it adds. */
  async startBatch(networkId: number, paths: string[], options: Record<string, unknown>): Promise<number> {
    const res = await this.knex().raw<{ rows: Array<{ id: number }> }>(
      'insert into irc_import_batches (network_id, paths, options) values (?, ?::jsonb, ?::jsonb) returning id',
      [networkId, JSON.stringify(paths), JSON.stringify(options)],
    );
    return Number(res.rows[0]!.id);
  }

  async finishBatch(id: number, c: { files: number; lines: number; inserted: number; unparsed: number }): Promise<void> {
    await this.knex().raw('update irc_import_batches set finished_at = now(), files = ?, lines = ?, inserted = ?, unparsed = ? where id = ?', [
      c.files,
      c.lines,
      c.inserted,
      c.unparsed,
      id,
    ]);
  }

  async ensureChannel(networkId: number, name: string): Promise<number> {
    const res = await this.knex().raw<{ rows: Array<{ id: number; added: boolean }> }>(
      `insert into irc_channels (network_id, name, is_private) values (?, ?, ?)
       on conflict (network_id, name) do update set name = excluded.name returning id, (xmax = 0) as added`,
      [networkId, name, !isChannelName(name)],
    );
    if (res.rows[0]!.added) this.archiveChanged();
    return Number(res.rows[0]!.id);
  }

  /**
   * Writes rows of one channel (skipping keys already stored); returns how many were added. In a
   * transaction of the caller's (`trx`), the caller reports the change (archiveChanged) once it committed.
   */
  async insert(
    networkId: number,
    channelId: number,
    events: NewIrcEvent[],
    opts: { trx?: Knex.Transaction; batchSize?: number; importBatchId?: number | null } = {},
  ): Promise<number> {
    if (!events.length) return 0;
    const run = async (trx: Knex.Transaction) => {
      let inserted = 0;
      const nicks = new Map<string, NickStat>();
      const links = new Set<string>();
      const batchSize = opts.batchSize ?? 1000;
      for (let i = 0; i < events.length; i += batchSize) {
        const added = await this.insertBatch(trx, channelId, events.slice(i, i + batchSize), opts.importBatchId ?? null);
        inserted += added.inserted;
        for (const n of added.nicks) {
          const had = nicks.get(n.k);
          nicks.set(n.k, had ? mergeNick(had, n) : n);
        }
        for (const l of added.links) links.add(l);
      }
      await this.upsertNicks(trx, networkId, [...nicks.values()], [...links]);
      return inserted;
    };
    if (opts.trx) return run(opts.trx);
    const inserted = await this.knex().transaction(run);
    if (inserted > 0) this.archiveChanged();
    return inserted;
  }

  private async insertBatch(
    trx: Knex.Transaction,
    channelId: number,
    batch: NewIrcEvent[],
    importBatchId: number | null,
  ): Promise<{ inserted: number; nicks: NickStat[]; links: string[] }> {
    const values: unknown[] = [];
    for (const e of batch) {
      values.push(
        channelId,
        e.eventType,
        e.occurredAt,
        e.nick,
        e.messageText,
        e.target,
        e.toNick,
        e.netsplitGroup,
        e.netsplitLeader,
        e.lineHash,
        importBatchId,
      );
    }
    const row = `(${new Array(COLUMNS).fill('?').join(', ')})`;
    const res = await trx.raw<{ rows: Array<{ inserted: string; nicks: NickStat[]; links: string[] }> }>(
      `with ins as (
         insert into irc_events (channel_id, event_type, occurred_at, nick, message_text, target, to_nick, netsplit_group, netsplit_leader, line_hash, import_batch_id)
         values ${batch.map(() => row).join(', ')}
         on conflict (channel_id, line_hash) do nothing
         returning event_type, occurred_at, nick, to_nick, netsplit_leader, search_vector
       ), terms as (
         insert into irc_term_months as t (term, channel_id, month, n, days)
         select l.lexeme, ?::int, date_trunc('month', i.occurred_at)::date, count(*), bit_or(1 << (extract(day from i.occurred_at)::int - 1))
           from ins i cross join lateral unnest(i.search_vector) l
          where i.event_type not in ('NETSPLIT', 'NETMERGE')
          group by 1, 3
          -- One order for every writer, so two concurrent inserts never wait on each other crosswise.
          order by 1, 3
         on conflict (term, channel_id, month) do update set n = t.n + excluded.n, days = t.days | excluded.days
       ), pairs as (
         -- The pairs of common and frequent lexemes in the rows (irc_frequent_terms, read in this
         -- statement's snapshot: IrcCommonTerms changes the list only while no insert runs).
         insert into irc_term_pairs as p (common, term, channel_id, n)
         select h.lexeme, l.lexeme, ?::int, count(*)
           ${pairsOf('ins')}
          group by 1, 2
          order by 1, 2
         on conflict (common, term, channel_id) do update set n = p.n + excluded.n
       ), span as (
         select count(*) as n, min(occurred_at) as lo, max(occurred_at) as hi,
                count(*) filter (where event_type in ('NETSPLIT', 'NETMERGE')) as ns,
                count(*) filter (where event_type in ('NETSPLIT', 'NETMERGE') and netsplit_leader) as nl
           from ins
       ), channel as (
         update irc_channels c
            set event_count = c.event_count + span.n, first_at = least(c.first_at, span.lo), last_at = greatest(c.last_at, span.hi),
                netsplit_count = c.netsplit_count + span.ns, netsplit_leader_count = c.netsplit_leader_count + span.nl
           from span where c.id = ?::int and span.n > 0
       ), days as (
         insert into irc_channel_days as d (channel_id, day, events, messages)
         select ?::int, occurred_at::date, count(*), count(*) filter (where event_type in ('PRIVMSG', 'ACTION', 'NOTICE'))
           from ins group by 2 order by 2
         on conflict (channel_id, day) do update set events = d.events + excluded.events, messages = d.messages + excluded.messages
       )
       -- Data-modifying CTEs run whether or not they are read. The nick statistics and links of
       -- the added rows go back to insert(), which writes them once for all its batches.
       select span.n as inserted,
              (select coalesce(jsonb_agg(x), '[]'::jsonb) from (
                 select lower(nick) as k, max(nick) as nick, min(occurred_at) as first_at, max(occurred_at) as last_at,
                        max(occurred_at) filter (where event_type in ('PRIVMSG', 'ACTION')) as last_message_at,
                        count(*) filter (where event_type in ('PRIVMSG', 'ACTION')) as messages, count(*) as events
                   from ins where nick is not null group by lower(nick)) x) as nicks,
              (select coalesce(jsonb_agg(distinct least(lower(nick), lower(to_nick)) || ' ' || greatest(lower(nick), lower(to_nick))), '[]'::jsonb)
                 from ins
                where event_type = 'NICK' and nick is not null and to_nick is not null and lower(nick) <> lower(to_nick)
                  and lower(nick) !~ '^guest[0-9]+$' and lower(to_nick) !~ '^guest[0-9]+$') as links
         from span`,
      [...values, channelId, channelId, channelId, channelId],
    );
    const out = res.rows[0]!;
    return { inserted: Number(out.inserted), nicks: out.nicks, links: out.links };
  }

  /**
   * The per-nick statistics and nick links of the rows one insert() added, in one statement each,
   * in key order (so concurrent writers of one network lock its nick rows in the same order).
   */
  private async upsertNicks(trx: Knex.Transaction, networkId: number, nicks: NickStat[], links: string[]): Promise<void> {
    if (nicks.length) {
      await trx.raw(
        `insert into irc_nicks as n (network_id, nick_key, nick, first_at, last_at, last_message_at, message_count, event_count)
         select ?::int, x.k, x.nick, x.first_at, x.last_at, x.last_message_at, x.messages, x.events
           from jsonb_to_recordset(?::jsonb)
                as x(k text, nick text, first_at timestamp, last_at timestamp, last_message_at timestamp, messages bigint, events bigint)
          order by x.k
         on conflict (network_id, nick_key) do update
            set first_at = least(n.first_at, excluded.first_at), last_at = greatest(n.last_at, excluded.last_at),
                last_message_at = greatest(n.last_message_at, excluded.last_message_at),
                nick = case when excluded.last_at >= n.last_at then excluded.nick else n.nick end,
                message_count = n.message_count + excluded.message_count, event_count = n.event_count + excluded.event_count`,
        [networkId, JSON.stringify(nicks)],
      );
    }
    if (links.length) {
      await trx.raw(
        `insert into irc_nick_links (network_id, nick_key, other_key, origin)
         select ?::int, split_part(l, ' ', 1), split_part(l, ' ', 2), 'log' from unnest(?::text[]) as u(l) order by l
         on conflict do nothing`,
        [networkId, links],
      );
    }
  }
}

/** Two batches' statistics of one nick: the spelling of the later one (as the upsert keeps it), sums and bounds. */
function mergeNick(a: NickStat, b: NickStat): NickStat {
  const later = b.last_at >= a.last_at ? b : a;
  const maxOf = (x: string | null, y: string | null) => (x === null ? y : y === null ? x : x > y ? x : y);
  return {
    k: a.k,
    nick: later.nick,
    first_at: a.first_at < b.first_at ? a.first_at : b.first_at,
    last_at: later.last_at,
    last_message_at: maxOf(a.last_message_at, b.last_message_at),
    messages: Number(a.messages) + Number(b.messages),
    events: Number(a.events) + Number(b.events),
  };
}
