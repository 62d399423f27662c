/**
 * The SQL of corrections (correction-service.ts): import batches, and the removal of rows with
 * the repair of what was kept beside them. Which rows go is a RowFilter; each of its conditions
 * is off when null (unnamed statements are planned with their values, so an unused condition
 * costs nothing).
 */
import { sql } from '../db/sql.js';
import { pairsOf } from './common-terms-repository.js';

const STAMP = `'YYYY-MM-DD HH24:MI:SS'`;

/** Rows of irc_events `e` to remove: every condition that is not null holds. */
export interface RowFilter {
  batchId: number | null;
  channelId: number | null;
  /** The channels of this network. */
  networkId: number | null;
  /** `occurred_at` at or after. */
  from: string | null;
  /** `occurred_at` before. */
  before: string | null;
  /** `occurred_at` at or before. */
  until: string | null;
}
const WHERE = `(:batchId::bigint is null or e.import_batch_id = :batchId)
  and (:channelId::int is null or e.channel_id = :channelId)
  and (:networkId::int is null or e.channel_id in (select id from irc_channels where network_id = :networkId))
  and (:from::timestamp is null or e.occurred_at >= :from::timestamp)
  and (:before::timestamp is null or e.occurred_at < :before::timestamp)
  and (:until::timestamp is null or e.occurred_at <= :until::timestamp)`;

export interface RemovedRow {
  n: string;
  channels: number[] | null;
  nicks: string[] | null;
  groups: string[] | null;
  pairs: Array<[string, string]> | null;
  months: Array<[number, string]> | null;
  days: Array<[number, string]> | null;
}

const CHANNEL_MONTHS = `select (p->>0)::int as ch, (p->>1)::date as m from jsonb_array_elements(:months::jsonb) as p`;
const CHANNEL_DAYS = `select (p->>0)::int as ch, (p->>1)::date as d from jsonb_array_elements(:days::jsonb) as p`;

export const Corrections = {
  batches: sql<{ source: string | null; network: string | null }, Record<string, unknown>>(
    `select b.id, n.source, n.name as network, b.paths, b.options, to_char(b.started_at at time zone 'UTC', ${STAMP}) as started_at,
            to_char(b.finished_at at time zone 'UTC', ${STAMP}) as finished_at, to_char(b.reverted_at at time zone 'UTC', ${STAMP}) as reverted_at,
            b.files, b.lines, b.inserted, b.unparsed,
            (select count(*) from irc_events e where e.import_batch_id = b.id) as rows
       from irc_import_batches b join irc_networks n on n.id = b.network_id
      where (:source::text is null or n.source = :source) and (:network::text is null or n.name = :network)
      order by b.id desc`,
  ),
  batch: sql<{ id: number }, { network_id: number; name: string; reverted_at: string | null }>(
    'select b.network_id, n.name, b.reverted_at from irc_import_batches b join irc_networks n on n.id = b.network_id where b.id = :id',
  ),
  markReverted: sql<{ id: number }>('update irc_import_batches set reverted_at = coalesce(reverted_at, now()) where id = :id'),
  networkId: sql<{ source: string; name: string }, { id: number }>('select id from irc_networks where source = :source and name = :name'),
  channelId: sql<{ networkId: number; name: string }, { id: number }>(
    'select id from irc_channels where network_id = :networkId and lower(name) = lower(:name)',
  ),
  /**
   * What a removal would do, without doing it: the nick links counted are those it would delete
   * (learnt from the log, not an admin's, and with no NICK row left outside these).
   */
  preview: sql<RowFilter & { network: number }, { n: string; channels: string; nicks: string; links: string }>(
    `with del as (
       select e.id, e.channel_id, lower(e.nick) as nk, lower(e.to_nick) as tk, e.event_type from irc_events e where ${WHERE}
     ), pairs as (
       select distinct least(nk, tk) as a, greatest(nk, tk) as b from del
        where event_type = 'NICK' and nk is not null and tk is not null and nk <> tk
     )
     select (select count(*) from del) as n, (select count(distinct channel_id) from del) as channels,
            (select count(distinct nk) from del where nk is not null) as nicks,
            (select count(*) from irc_nick_links l join pairs p on l.nick_key = p.a and l.other_key = p.b
              where l.network_id = :network and l.origin = 'log' and not l.blocked
                and not exists (
                  select 1 from irc_events e
                   where e.event_type = 'NICK' and e.channel_id in (select id from irc_channels where network_id = :network)
                     and not exists (select 1 from del where del.id = e.id)
                     and ((lower(e.nick) = p.a and lower(e.to_nick) = p.b) or (lower(e.nick) = p.b and lower(e.to_nick) = p.a)))) as links`,
  ),
  /** Deletes the rows, takes their word pairs off the pair counts, and says what they touched. */
  remove: sql<RowFilter, RemovedRow>(
    `with del as (
       delete from irc_events e where ${WHERE}
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
  ),
  /** A netsplit burst that lost its leader gets its earliest remaining row as leader. */
  newLeaders: sql<{ groups: string[]; channels: number[] }>(
    `update irc_events e set netsplit_leader = true
       from (select distinct on (netsplit_group) id, netsplit_group from irc_events
              where netsplit_group = any(:groups::bigint[]) and channel_id = any(:channels::int[]) order by netsplit_group, occurred_at, id) f
      where e.id = f.id and not e.netsplit_leader
        and not exists (select 1 from irc_events x where x.netsplit_group = f.netsplit_group and x.channel_id = e.channel_id and x.netsplit_leader)`,
  ),
  recountChannels: sql<{ channels: number[] }>(
    `update irc_channels c set event_count = s.n, first_at = s.lo, last_at = s.hi, netsplit_count = s.ns, netsplit_leader_count = s.nl
       from (select ch.id, count(e.id) as n, min(e.occurred_at) as lo, max(e.occurred_at) as hi,
                    count(e.id) filter (where e.event_type in ('NETSPLIT', 'NETMERGE')) as ns,
                    count(e.id) filter (where e.event_type in ('NETSPLIT', 'NETMERGE') and e.netsplit_leader) as nl
               from unnest(:channels::int[]) as ch(id) left join irc_events e on e.channel_id = ch.id group by ch.id) s
      where c.id = s.id`,
  ),
  /** The nicks recomputed from their remaining rows (dropped when none is left); the display spelling is the one seen last. */
  recountNicks: sql<{ nicks: string[]; networkId: number }>(
    `with s as (
       select lower(e.nick) as k, (array_agg(e.nick order by e.occurred_at desc, e.id desc))[1] as nick,
              min(e.occurred_at) as lo, max(e.occurred_at) as hi,
              max(e.occurred_at) filter (where e.event_type in ('PRIVMSG', 'ACTION')) as lm,
              count(*) filter (where e.event_type in ('PRIVMSG', 'ACTION')) as messages, count(*) as events
         from irc_events e
        where lower(e.nick) = any(:nicks::text[]) and e.channel_id in (select id from irc_channels where network_id = :networkId)
        group by 1
     ), gone as (
       delete from irc_nicks n where n.network_id = :networkId and n.nick_key = any(:nicks::text[]) and not exists (select 1 from s where s.k = n.nick_key)
     )
     update irc_nicks n set nick = s.nick, first_at = s.lo, last_at = s.hi, last_message_at = s.lm, message_count = s.messages, event_count = s.events
       from s where n.network_id = :networkId and n.nick_key = s.k`,
  ),
  /** The term counts of each channel-month that lost rows (`months`: JSON [channel, month] pairs), recounted from the rows left. */
  dropMonths: sql<{ months: string }>(`delete from irc_term_months t using (${CHANNEL_MONTHS}) cm where t.channel_id = cm.ch and t.month = cm.m`),
  recountMonths: sql<{ months: string }>(
    `insert into irc_term_months (term, channel_id, month, n, days)
     select l.lexeme, cm.ch, cm.m, count(*), bit_or(1 << (extract(day from e.occurred_at)::int - 1))
       from (${CHANNEL_MONTHS}) cm
       join irc_events e on e.channel_id = cm.ch and e.occurred_at >= cm.m and e.occurred_at < cm.m + interval '1 month'
       cross join lateral unnest(e.search_vector) l
      where e.event_type not in ('NETSPLIT', 'NETMERGE')
      group by 1, 2, 3`,
  ),
  /** The rows per day of each channel-day that lost rows (`days`: JSON [channel, day] pairs), recounted from the rows left. */
  dropDays: sql<{ days: string }>(`delete from irc_channel_days x using (${CHANNEL_DAYS}) cd where x.channel_id = cd.ch and x.day = cd.d`),
  recountDays: sql<{ days: string }>(
    `insert into irc_channel_days (channel_id, day, events, messages)
     select cd.ch, cd.d, count(*), count(*) filter (where e.event_type in ('PRIVMSG', 'ACTION', 'NOTICE'))
       from (${CHANNEL_DAYS}) cd join irc_events e on e.channel_id = cd.ch and e.occurred_at >= cd.d and e.occurred_at < cd.d + interval '1 day'
      group by 1, 2`,
  ),
  /** Log links (not an admin's) whose NICK rows are all gone (`pairs`: JSON [nick, other] pairs). */
  dropLinks: sql<{ pairs: string; networkId: number }>(
    `delete from irc_nick_links l
      using jsonb_array_elements(:pairs::jsonb) as p(pair)
      where l.network_id = :networkId and l.nick_key = p.pair->>0 and l.other_key = p.pair->>1 and l.origin = 'log' and not l.blocked
        and not exists (
          select 1 from irc_events e
           where e.event_type = 'NICK' and e.channel_id in (select id from irc_channels where network_id = :networkId)
             and ((lower(e.nick) = p.pair->>0 and lower(e.to_nick) = p.pair->>1) or (lower(e.nick) = p.pair->>1 and lower(e.to_nick) = p.pair->>0)))`,
  ),
};

/** A filter with every condition off. */
export const NO_FILTER: RowFilter = { batchId: null, channelId: null, networkId: null, from: null, before: null, until: null };
