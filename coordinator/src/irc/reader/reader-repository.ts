import type { Orm } from '../../db/orm.js';
import { dbOf, sql, type Sql } from '../../db/sql.js';
import { AppError } from '../../http/errors.js';
import type { IrcSource } from '../event-store.js';

export interface NetworkSummary {
  id: number;
  name: string;
  channels: number;
  events: number;
  last_date: string | null;
}

export interface ReaderChannel {
  id: number;
  name: string;
  network_id: number;
  first_date: string | null;
  last_date: string | null;
  event_count: number;
}

/** Rows of one day (or month) of a channel or a person: all of them, and the messages among them. */
export interface ActivityCount {
  /** `YYYY-MM-DD` for a day, `YYYY-MM` for a month. */
  key: string;
  events: number;
  messages: number;
}

export interface DayNeighbours {
  has: boolean;
  prev: string | null;
  next: string | null;
}

const STAMP = `'YYYY-MM-DD HH24:MI:SS'`;
/** Rows a collapsed netsplit view does not show: every row of a burst but its leader. */
const VISIBLE = `(e.event_type not in ('NETSPLIT', 'NETMERGE') or e.netsplit_leader)`;
const MESSAGES = `e.event_type in ('PRIVMSG', 'ACTION', 'NOTICE')`;

type ChannelRow = { id: number; name: string; network_id: number; first_date: string | null; last_date: string | null; event_count: string };
type CountRow = { key: string; events: string; messages: string };

/** How many rows of a channel's day come before row `id` (rowsBefore), counting only `types` or every type. */
const rowsBefore = (typed: boolean) =>
  sql<{ day: string; id: number; channelId: number; types?: readonly string[] }, { n: string | null }>(
    `select (select count(*) from irc_events e
              where e.channel_id = r.channel_id and e.occurred_at >= :day::timestamp and (e.occurred_at, e.id) < (r.occurred_at, r.id)
                and ${VISIBLE} ${typed ? 'and e.event_type = any(:types::text[])' : ''}) as n
       from irc_events r
      where r.id = :id and r.channel_id = :channelId and r.occurred_at >= :day::timestamp and r.occurred_at < :day::timestamp + interval '1 day'`,
  );

const Q = {
  networks: sql<{ source: string }, { id: number; name: string; channels: string; events: string | null; last_date: string | null }>(
    `select n.id, n.name, count(c.id) as channels, sum(c.event_count) as events, to_char(max(c.last_at), ${STAMP}) as last_date
       from irc_networks n left join irc_channels c on c.network_id = n.id
      where n.source = :source group by n.id order by n.name, n.id`,
  ),
  network: sql<{ source: string; name: string }, { id: number; name: string }>('select id, name from irc_networks where source = :source and name = :name'),
  channel: sql<{ networkId: number; name: string }, ChannelRow>(
    `select id, name, network_id, to_char(first_at, ${STAMP}) as first_date, to_char(last_at, ${STAMP}) as last_date, event_count
       from irc_channels where network_id = :networkId and name = :name`,
  ),
  channelYears: sql<{ channelId: number }, { y: number }>(
    `select distinct extract(year from day)::int as y from irc_channel_days where channel_id = :channelId and events > 0 order by 1`,
  ),
  channelDays: sql<{ channelId: number; from: string; to: string }, CountRow>(
    `select to_char(day, 'YYYY-MM-DD') as key, events, messages from irc_channel_days
      where channel_id = :channelId and day >= :from::date and day < :to::date and events > 0 order by day`,
  ),
  aroundDay: sql<{ channelId: number; day: string }, { has: boolean; prev: string | null; next: string | null }>(
    `select exists (select 1 from irc_events e where e.channel_id = :channelId and e.occurred_at >= :day::timestamp
                      and e.occurred_at < :day::timestamp + interval '1 day') as has,
            (select to_char(max(e.occurred_at), 'YYYY-MM-DD') from irc_events e where e.channel_id = :channelId and e.occurred_at < :day::timestamp) as prev,
            (select to_char(min(e.occurred_at), 'YYYY-MM-DD') from irc_events e
              where e.channel_id = :channelId and e.occurred_at >= :day::timestamp + interval '1 day') as next`,
  ),
  rowsBefore: rowsBefore(false),
  rowsBeforeTyped: rowsBefore(true),
  nickMonths: sql<{ nickKeys: string[]; networkIds: number[] }, CountRow>(
    `select to_char(e.occurred_at, 'YYYY-MM') as key, count(*) as events, count(*) filter (where ${MESSAGES}) as messages
       from irc_events e
      where lower(e.nick) = any(:nickKeys::text[]) and ${VISIBLE}
        and (e.channel_id + 0) in (select c.id from irc_channels c where c.network_id = any(:networkIds::int[]))
      group by 1 order by 1`,
  ),
};

/**
 * The reader pages' own reads (name lookups and activity counts); rows and searches come from
 * IrcArchiveService. A channel's days come from irc_channel_days (kept at write time); a person's
 * months are one index-only scan of (lower(nick), occurred_at, id) include (channel_id,
 * event_type, netsplit_leader). Statements run under the archive's statement timeout.
 */
export class IrcReaderStore {
  private readonly timeout: Sql<Record<string, never>, never>;

  constructor(
    private readonly orm: Orm,
    queryTimeoutMs: number,
  ) {
    this.timeout = sql(`set local statement_timeout = ${Math.floor(queryTimeoutMs)}`);
  }

  private async rows<P extends object, T>(statement: Sql<P, T>, params: P): Promise<T[]> {
    try {
      return await dbOf(this.orm.em).transaction(
        async (trx) => {
          await this.timeout.run(trx, {});
          return statement.rows(trx, params);
        },
        { readOnly: true },
      );
    } catch (err) {
      if ((err as { code?: string }).code === '57014') throw new AppError('service_unavailable', 'the archive took too long to answer; try again later');
      throw err;
    }
  }

  /** Networks of an archive with their channel count, stored rows and last activity (from the channel counters). */
  async networks(source: IrcSource): Promise<NetworkSummary[]> {
    const rows = await this.rows(Q.networks, { source });
    return rows.map((r) => ({ id: Number(r.id), name: r.name, channels: Number(r.channels), events: Number(r.events ?? 0), last_date: r.last_date }));
  }

  async network(source: IrcSource, name: string): Promise<{ id: number; name: string } | null> {
    const [row] = await this.rows(Q.network, { source, name });
    return row ? { id: Number(row.id), name: row.name } : null;
  }

  async channel(networkId: number, name: string): Promise<ReaderChannel | null> {
    const [row] = await this.rows(Q.channel, { networkId, name });
    return row
      ? {
          id: Number(row.id),
          name: row.name,
          network_id: Number(row.network_id),
          first_date: row.first_date,
          last_date: row.last_date,
          event_count: Number(row.event_count),
        }
      : null;
  }

  /** The years (UTC) in which the channel has rows, in order (irc_channel_days, kept at write time). */
  async channelYears(channelId: number): Promise<number[]> {
    const rows = await this.rows(Q.channelYears, { channelId });
    return rows.map((r) => Number(r.y));
  }

  /** Days of `year` (UTC) on which the channel has rows, with their counts (irc_channel_days, kept at write time). */
  async channelDays(channelId: number, year: number): Promise<ActivityCount[]> {
    const rows = await this.rows(Q.channelDays, {
      channelId,
      from: `${String(year).padStart(4, '0')}-01-01`,
      to: `${String(year + 1).padStart(4, '0')}-01-01`,
    });
    return rows.map((r) => ({ key: r.key, events: Number(r.events), messages: Number(r.messages) }));
  }

  /** Whether the channel has rows on `day` (UTC), and its previous and next days with rows. */
  async aroundDay(channelId: number, day: string): Promise<DayNeighbours> {
    const [row] = await this.rows(Q.aroundDay, { channelId, day });
    return { has: Boolean(row?.has), prev: row?.prev ?? null, next: row?.next ?? null };
  }

  /**
   * How many rows of the channel's day come before row `id` in (occurred_at, id) order, counting
   * only `types` (null: every type) and one row per netsplit burst, as the day view lists them;
   * null when the row is not on that day of that channel.
   */
  async rowsBefore(channelId: number, day: string, id: number, types: readonly string[] | null): Promise<number | null> {
    const [row] = types ? await this.rows(Q.rowsBeforeTyped, { day, id, channelId, types }) : await this.rows(Q.rowsBefore, { day, id, channelId });
    return row?.n == null ? null : Number(row.n);
  }

  /** Rows per month (UTC) of these nicks in these networks. */
  async nickMonths(networkIds: number[], nickKeys: string[]): Promise<ActivityCount[]> {
    if (!networkIds.length || !nickKeys.length) return [];
    const rows = await this.rows(Q.nickMonths, { nickKeys, networkIds });
    return rows.map((r) => ({ key: r.key, events: Number(r.events), messages: Number(r.messages) }));
  }
}
