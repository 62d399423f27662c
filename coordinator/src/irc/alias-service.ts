import type { Knex } from 'knex';
import { AppError } from '../http/errors.js';
import { IrcEventStore, type IrcSource } from './event-store.js';
import type { Orm } from '../db/orm.js';

/** How far alias resolution walks from the named nick, and how many nicks one person may have. */
const MAX_DEPTH = 8;
const MAX_ALIASES = 64;

export interface NickProfile {
  nick: string;
  aliases: string[];
  first_seen: string;
  /** Last row of any kind (presence). */
  last_seen: string;
  /** Last PRIVMSG/ACTION; null when none. */
  last_message: string | null;
  message_count: number;
  event_count: number;
  networks: Array<{ id: number; name: string }>;
}

export interface AliasLink {
  network: string;
  nick: string;
  alias: string;
  origin: 'log' | 'admin';
  blocked: boolean;
}

/**
 * Nick aliases: links come from NICK events at write time (event store) and from admins here.
 * A person is every nick reachable through unblocked links (within one network). An admin's
 * removal blocks the link, so re-importing the logs does not bring it back.
 */
/** A row of `profile`'s query (bigint counts arrive as strings). */
interface ProfileRow {
  nick: string;
  nick_key: string;
  network_id: number;
  network_name: string;
  first_seen: string;
  last_seen: string;
  last_message: string | null;
  message_count: string;
  event_count: string;
}

export class IrcAliasService {
  private readonly store: IrcEventStore;
  constructor(orm: Orm) {
    this.store = new IrcEventStore(orm);
  }

  private knex(): Knex {
    return this.store.knex();
  }

  /** Lower-case nick keys of the person `nick` names, across the given networks (always includes `nick` itself). */
  async resolve(nick: string, networkIds: number[]): Promise<string[]> {
    const key = nick.toLowerCase();
    if (!networkIds.length) return [key];
    const res = await this.knex().raw<{ rows: Array<{ nick_key: string }> }>(
      `with recursive walk(network_id, nick_key, depth) as (
         select n, ?::text, 0 from unnest(?::int[]) as n
         union
         select w.network_id, x.k, w.depth + 1
           from walk w cross join lateral (
             select l.other_key as k from irc_nick_links l where l.network_id = w.network_id and l.nick_key = w.nick_key and not l.blocked
             union all
             select l.nick_key from irc_nick_links l where l.network_id = w.network_id and l.other_key = w.nick_key and not l.blocked
           ) x
          where w.depth < ?
       )
       select distinct nick_key from walk limit ?`,
      [key, networkIds, MAX_DEPTH, MAX_ALIASES],
    );
    const keys = res.rows.map((r) => r.nick_key);
    return keys.includes(key) ? keys : [key, ...keys];
  }

  /** The profile of the person `nick` names, or null when none of their nicks was ever seen in these networks. */
  async profile(nick: string, keys: string[], networkIds: number[]): Promise<NickProfile | null> {
    if (!networkIds.length) return null;
    const res = await this.knex().raw<{ rows: ProfileRow[] }>(
      `select k.nick, k.nick_key, k.network_id, w.name as network_name,
              to_char(k.first_at, 'YYYY-MM-DD HH24:MI:SS') as first_seen, to_char(k.last_at, 'YYYY-MM-DD HH24:MI:SS') as last_seen,
              to_char(k.last_message_at, 'YYYY-MM-DD HH24:MI:SS') as last_message,
              k.message_count, k.event_count
         from irc_nicks k join irc_networks w on w.id = k.network_id
        where k.network_id = any(?::int[]) and k.nick_key = any(?::text[])
        order by k.last_at desc`,
      [networkIds, keys],
    );
    const rows = res.rows;
    if (!rows.length) return null;
    const key = nick.toLowerCase();
    const own = rows.find((r) => r.nick_key === key);
    const display = own?.nick ?? nick;
    const aliases = [...new Set(rows.filter((r) => r.nick_key !== key).map((r) => r.nick))].sort((a, b) => a.localeCompare(b));
    const networks = [...new Map(rows.map((r) => [r.network_id, { id: Number(r.network_id), name: r.network_name }])).values()].sort((a, b) => a.id - b.id);
    return {
      nick: display,
      aliases,
      first_seen: rows.reduce((m, r) => (r.first_seen < m ? r.first_seen : m), rows[0]!.first_seen),
      last_seen: rows.reduce((m, r) => (r.last_seen > m ? r.last_seen : m), rows[0]!.last_seen),
      last_message: rows.reduce<string | null>((m, r) => (r.last_message !== null && (m === null || r.last_message > m) ? r.last_message : m), null),
      message_count: rows.reduce((n, r) => n + Number(r.message_count), 0),
      event_count: rows.reduce((n, r) => n + Number(r.event_count), 0),
      networks,
    };
  }

  private async networkId(source: IrcSource, network: string): Promise<number> {
    const res = await this.knex().raw<{ rows: Array<{ id: number }> }>('select id from irc_networks where source = ? and name = ?', [source, network]);
    const row = res.rows[0];
    if (!row) throw new AppError('not_found', `no network "${network}" in the ${source} archive`);
    return Number(row.id);
  }

  private static pair(nick: string, alias: string): [string, string] {
    const a = nick.trim().toLowerCase();
    const b = alias.trim().toLowerCase();
    if (!/^\S{1,64}$/.test(a) || !/^\S{1,64}$/.test(b)) throw new AppError('validation_failed', 'nicks must be 1 to 64 characters without spaces');
    if (a === b) throw new AppError('validation_failed', 'a nick cannot be an alias of itself');
    return a < b ? [a, b] : [b, a];
  }

  /** Links two nicks as one person (an admin's word overrides an earlier removal). */
  async add(source: IrcSource, network: string, nick: string, alias: string): Promise<void> {
    const id = await this.networkId(source, network);
    const [a, b] = IrcAliasService.pair(nick, alias);
    await this.knex().raw(
      `insert into irc_nick_links (network_id, nick_key, other_key, origin) values (?, ?, ?, 'admin')
       on conflict (network_id, nick_key, other_key) do update set blocked = false, origin = 'admin'`,
      [id, a, b],
    );
    this.store.archiveChanged();
  }

  /** Unlinks two nicks and keeps them unlinked on re-import; false when they were not linked. */
  async remove(source: IrcSource, network: string, nick: string, alias: string): Promise<boolean> {
    const id = await this.networkId(source, network);
    const [a, b] = IrcAliasService.pair(nick, alias);
    const res = await this.knex().raw<{ rows: Array<{ existed: boolean }> }>(
      `insert into irc_nick_links (network_id, nick_key, other_key, origin, blocked) values (?, ?, ?, 'admin', true)
       on conflict (network_id, nick_key, other_key) do update set blocked = true, origin = 'admin'
       returning (xmax <> 0) as existed`,
      [id, a, b],
    );
    this.store.archiveChanged();
    return Boolean(res.rows[0]?.existed);
  }

  /** Links of a network (optionally only those touching `nick`), blocked ones included. */
  async list(source: IrcSource, network: string, nick?: string): Promise<AliasLink[]> {
    const id = await this.networkId(source, network);
    const key = nick?.toLowerCase();
    const res = await this.knex().raw<{ rows: Array<{ nick_key: string; other_key: string; origin: 'log' | 'admin'; blocked: boolean }> }>(
      `select nick_key, other_key, origin, blocked from irc_nick_links
        where network_id = ? ${key ? 'and (nick_key = ? or other_key = ?)' : ''}
        order by nick_key, other_key`,
      key ? [id, key, key] : [id],
    );
    return res.rows.map((r) => ({
      network,
      nick: r.nick_key,
      alias: r.other_key,
      origin: r.origin,
      blocked: r.blocked,
    }));
  }
}
