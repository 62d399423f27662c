import type { Knex } from 'knex';
import { AppError } from '../http/errors.js';
import { IrcEventStore, type IrcSource } from './event-store.js';
import type { Orm } from '../db/orm.js';
import { Aliases } from './alias-repository.js';

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
    const keys = (await Aliases.resolve.rows(this.knex(), { key, networkIds, depth: MAX_DEPTH, limit: MAX_ALIASES })).map((r) => r.nick_key);
    return keys.includes(key) ? keys : [key, ...keys];
  }

  /** The profile of the person `nick` names, or null when none of their nicks was ever seen in these networks. */
  async profile(nick: string, keys: string[], networkIds: number[]): Promise<NickProfile | null> {
    if (!networkIds.length) return null;
    const rows = await Aliases.profile.rows(this.knex(), { networkIds, keys });
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
    const row = await Aliases.networkId.first(this.knex(), { source, name: network });
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
    await Aliases.link.run(this.knex(), { networkId: id, a, b });
    this.store.archiveChanged();
  }

  /** Unlinks two nicks and keeps them unlinked on re-import; false when they were not linked. */
  async remove(source: IrcSource, network: string, nick: string, alias: string): Promise<boolean> {
    const id = await this.networkId(source, network);
    const [a, b] = IrcAliasService.pair(nick, alias);
    const row = await Aliases.block.first(this.knex(), { networkId: id, a, b });
    this.store.archiveChanged();
    return Boolean(row?.existed);
  }

  /** Links of a network (optionally only those touching `nick`), blocked ones included. */
  async list(source: IrcSource, network: string, nick?: string): Promise<AliasLink[]> {
    const id = await this.networkId(source, network);
    const key = nick?.toLowerCase();
    const rows = key ? await Aliases.listTouching.rows(this.knex(), { networkId: id, key }) : await Aliases.list.rows(this.knex(), { networkId: id });
    return rows.map((r) => ({
      network,
      nick: r.nick_key,
      alias: r.other_key,
      origin: r.origin,
      blocked: r.blocked,
    }));
  }
}
