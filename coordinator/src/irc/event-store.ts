import type { Knex } from 'knex';
import type { Orm } from '../db/orm.js';
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

/**
 * The one writer of chat-log rows, used by the file importer and the live logger. Each `insert`
 * keeps the channel's counters and span, the per-nick statistics, the nick links from NICK
 * events, the per-term monthly counts (irc_term_months) and the rows per channel and day
 * (irc_channel_days) in step with the rows it actually
 * added, in the same statement.
 */
export class IrcEventStore {
  constructor(private readonly orm: Orm) {}

  knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  async ensureNetwork(source: IrcSource, name: string): Promise<number> {
    const res = await this.knex().raw<{ rows: Array<{ id: number }> }>(
      `insert into irc_networks (source, name) values (?, ?) on conflict (source, name) do update set name = excluded.name returning id`,
      [source, name],
    );
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
    const res = await this.knex().raw<{ rows: Array<{ id: number }> }>(
      `insert into irc_channels (network_id, name, is_private) values (?, ?, ?)
       on conflict (network_id, name) do update set name = excluded.name returning id`,
      [networkId, name, !isChannelName(name)],
    );
    return Number(res.rows[0]!.id);
  }

  /** Writes rows of one channel (skipping keys already stored); returns how many were added. */
  async insert(
    networkId: number,
    channelId: number,
    events: NewIrcEvent[],
    opts: { trx?: Knex.Transaction; batchSize?: number; importBatchId?: number | null } = {},
  ): Promise<number> {
    if (!events.length) return 0;
    const run = async (trx: Knex.Transaction) => {
      let inserted = 0;
      const batchSize = opts.batchSize ?? 1000;
      for (let i = 0; i < events.length; i += batchSize)
        inserted += await this.insertBatch(trx, networkId, channelId, events.slice(i, i + batchSize), opts.importBatchId ?? null);
      return inserted;
    };
    return opts.trx ? run(opts.trx) : this.knex().transaction(run);
  }

  private async insertBatch(trx: Knex.Transaction, networkId: number, channelId: number, batch: NewIrcEvent[], importBatchId: number | null): Promise<number> {
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
    const res = await trx.raw<{ rows: Array<{ inserted: string }> }>(
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
       ), nicks as (
         insert into irc_nicks as n (network_id, nick_key, nick, first_at, last_at, last_message_at, message_count, event_count)
         select ?::int, lower(nick), max(nick), min(occurred_at), max(occurred_at),
                max(occurred_at) filter (where event_type in ('PRIVMSG', 'ACTION')),
                count(*) filter (where event_type in ('PRIVMSG', 'ACTION')), count(*)
           from ins where nick is not null group by lower(nick)
         on conflict (network_id, nick_key) do update
            set first_at = least(n.first_at, excluded.first_at), last_at = greatest(n.last_at, excluded.last_at),
                last_message_at = greatest(n.last_message_at, excluded.last_message_at),
                nick = case when excluded.last_at >= n.last_at then excluded.nick else n.nick end,
                message_count = n.message_count + excluded.message_count, event_count = n.event_count + excluded.event_count
       ), links as (
         insert into irc_nick_links (network_id, nick_key, other_key, origin)
         select distinct ?::int, least(lower(nick), lower(to_nick)), greatest(lower(nick), lower(to_nick)), 'log'
           from ins
          where event_type = 'NICK' and nick is not null and to_nick is not null and lower(nick) <> lower(to_nick)
            and lower(nick) !~ '^guest[0-9]+$' and lower(to_nick) !~ '^guest[0-9]+$'
         on conflict do nothing
       )
       -- Data-modifying CTEs run whether or not they are read; only the count is needed.
       select n as inserted from span`,
      [...values, channelId, channelId, channelId, networkId, networkId],
    );
    return Number(res.rows[0]!.inserted);
  }
}
