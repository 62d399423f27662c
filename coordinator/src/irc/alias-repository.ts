/** The SQL of nick aliases (alias-service.ts): the irc_nick_links graph and the per-nick counters of irc_nicks. */
import { sql } from '../db/sql.js';

/** A row of the profile query (bigint counts arrive as strings). */
export interface ProfileRow {
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

type Link = { networkId: number; a: string; b: string };
type LinkRow = { nick_key: string; other_key: string; origin: 'log' | 'admin'; blocked: boolean };
const LIST = (touching: boolean) =>
  sql<{ networkId: number; key?: string }, LinkRow>(
    `select nick_key, other_key, origin, blocked from irc_nick_links
      where network_id = :networkId ${touching ? 'and (nick_key = :key or other_key = :key)' : ''}
      order by nick_key, other_key`,
  );

export const Aliases = {
  /** Nick keys reachable from `key` through unblocked links, per network, within `depth` steps; at most `limit`. */
  resolve: sql<{ key: string; networkIds: number[]; depth: number; limit: number }, { nick_key: string }>(
    `with recursive walk(network_id, nick_key, depth) as (
       select n, :key::text, 0 from unnest(:networkIds::int[]) as n
       union
       select w.network_id, x.k, w.depth + 1
         from walk w cross join lateral (
           select l.other_key as k from irc_nick_links l where l.network_id = w.network_id and l.nick_key = w.nick_key and not l.blocked
           union all
           select l.nick_key from irc_nick_links l where l.network_id = w.network_id and l.other_key = w.nick_key and not l.blocked
         ) x
        where w.depth < :depth
     )
     select distinct nick_key from walk limit :limit`,
  ),
  profile: sql<{ networkIds: number[]; keys: string[] }, ProfileRow>(
    `select k.nick, k.nick_key, k.network_id, w.name as network_name,
            to_char(k.first_at, 'YYYY-MM-DD HH24:MI:SS') as first_seen, to_char(k.last_at, 'YYYY-MM-DD HH24:MI:SS') as last_seen,
            to_char(k.last_message_at, 'YYYY-MM-DD HH24:MI:SS') as last_message,
            k.message_count, k.event_count
       from irc_nicks k join irc_networks w on w.id = k.network_id
      where k.network_id = any(:networkIds::int[]) and k.nick_key = any(:keys::text[])
      order by k.last_at desc`,
  ),
  networkId: sql<{ source: string; name: string }, { id: number }>('select id from irc_networks where source = :source and name = :name'),
  /** An admin's link (overrides an earlier removal). */
  link: sql<Link>(
    `insert into irc_nick_links (network_id, nick_key, other_key, origin) values (:networkId, :a, :b, 'admin')
     on conflict (network_id, nick_key, other_key) do update set blocked = false, origin = 'admin'`,
  ),
  /** An admin's removal: the link stays, blocked, so a re-import does not bring it back. */
  block: sql<Link, { existed: boolean }>(
    `insert into irc_nick_links (network_id, nick_key, other_key, origin, blocked) values (:networkId, :a, :b, 'admin', true)
     on conflict (network_id, nick_key, other_key) do update set blocked = true, origin = 'admin'
     returning (xmax <> 0) as existed`,
  ),
  list: LIST(false),
  listTouching: LIST(true),
};
