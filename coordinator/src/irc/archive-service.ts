import { AsyncLocalStorage } from 'node:async_hooks';
import type { Knex } from 'knex';
import type { Orm } from '../db/orm.js';
import { withConnection, type PooledConnection } from '../db/sql.js';
import { AppError } from '../http/errors.js';
import { IrcAliasService, type NickProfile } from './alias-service.js';
import { IrcArchiveChanges } from './archive-changes.js';
import { IrcEventStore, type IrcSource } from './event-store.js';
import { anyTermClause, bothTermsClause, hasTextTerms, isExclusionOnly, isSelective, whereClause, type LogFilter } from './log-query.js';
import { addDays } from './parsers/common.js';
import { IrcSearchCache, searchKey, type IrcSearchCacheOptions } from './search-cache.js';
import { isPartsToken, type SearchTerm } from './search-terms.js';

export interface NetworkRow {
  id: number;
  name: string;
}

export interface ChannelRow {
  id: number;
  name: string;
  first_date: string | null;
  last_date: string | null;
  event_count: number;
}

export interface LogRow {
  id: number;
  event_type: string;
  occurred_at: string;
  nick: string | null;
  message_text: string | null;
  target: string | null;
  to_nick: string | null;
  channel_id: number;
  channel_name: string;
  network_id: number;
  /** Collapsed netsplit/merge bursts only (`bulk_netsplit`): how many rows the burst has, and whose. */
  netsplit_count?: number;
  netsplit_nicks?: string[];
  netsplit_last_at?: string;
}

/** Validated `/logs` parameters (see routes.ts for the wire names). */
export interface LogSearch {
  source: IrcSource;
  networkId: number | null;
  channelId: number | null;
  include: SearchTerm[];
  exclude: SearchTerm[];
  nick: string | null;
  recipient: string | null;
  privateOnly: boolean;
  date: string | null;
  datetimeFrom: string | null;
  datetimeTo: string | null;
  dateFrom: string | null;
  dateTo: string | null;
  limit: number;
  offset: number;
  includeNetsplit: boolean;
  bulkNetsplit: boolean;
  /** Only these event types (upper case); null: all. */
  eventTypes: string[] | null;
  /** `asc` (oldest first, the default) or `desc` (newest first). */
  order: 'asc' | 'desc';
}

export interface LogPage {
  total: number;
  results: LogRow[];
  nickProfile: NickProfile | null;
}

export interface DateAggregate {
  total: number;
  date_count: number;
  first_date: string | null;
  last_date: string | null;
  span_days: number;
}

const STAMP = `'YYYY-MM-DD HH24:MI:SS'`;
/** Netsplit bursts can be large; a collapsed row lists at most this many nicks. */
const NETSPLIT_NICKS_SHOWN = 50;

/**
 * The read side of the chat-log archive: networks, channels and the log search. Channel listings
 * and unfiltered totals come from counters kept at write time; filtered searches count in the same
 * statement that finds the page.
 */
export class IrcArchiveService {
  private readonly store: IrcEventStore;
  readonly aliases: IrcAliasService;
  private readonly queryTimeoutMs: number;
  /** The connection holding the transaction of the search running in this async context (its statement_timeout applies). */
  private readonly current = new AsyncLocalStorage<PooledConnection>();

  /** Answers of search(), aggregateDates() and nickProfile(), until the archive changes. */
  private readonly cache: IrcSearchCache;

  constructor(orm: Orm, opts: { queryTimeoutMs?: number; cache?: IrcSearchCacheOptions } = {}) {
    this.store = new IrcEventStore(orm);
    this.aliases = new IrcAliasService(orm);
    this.queryTimeoutMs = opts.queryTimeoutMs ?? 5000;
    this.cache = new IrcSearchCache(IrcArchiveChanges.of(orm), opts.cache ?? { maxBytes: 0, ttlMs: 0 });
  }

  private knex(): Knex {
    return this.store.knex();
  }

  private async rows<T>(sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
    const raw = this.knex().raw<{ rows: T[] }>(sql, bindings as unknown[]);
    const conn = this.current.getStore();
    return (await (conn === undefined ? raw : raw.connection(conn))).rows;
  }

  /**
   * Runs a search's statements in one read-only transaction with `statement_timeout`, so no
   * request can hold a pooled connection for long; a statement cut off answers 503 with a hint.
   * The transaction is opened by hand on a pooled connection so that BEGIN and the two settings
   * go in one simple-protocol message (knex's transaction() sends BEGIN on its own: one round
   * trip more per search).
   */
  private async bounded<T>(fn: () => Promise<T>): Promise<T> {
    const knex = this.knex();
    return withConnection(knex, async (conn) => {
      try {
        // Each search runs once with its own values: plan it for them (the pool's connections
        // default to generic plans for the worker protocol's prepared statements, and a generic
        // plan cannot tell a rare word or a short date range from a common one).
        await knex
          .raw(`begin transaction read only; set local statement_timeout = ${Math.floor(this.queryTimeoutMs)}; set local plan_cache_mode = force_custom_plan`)
          .connection(conn);
        const out = await this.current.run(conn, fn);
        await knex.raw('commit').connection(conn);
        return out;
      } catch (err) {
        // A connection whose statement timed out on the client is destroyed on release (db/orm.ts);
        // any other one goes back to the pool outside a transaction.
        if (!conn.__knex__disposed)
          await knex
            .raw('rollback')
            .connection(conn)
            .catch(() => (conn.__knex__disposed = 'rollback failed'));
        if ((err as { code?: string }).code === '57014') {
          throw new AppError(
            'service_unavailable',
            `the search took longer than ${this.queryTimeoutMs / 1000} s and was stopped; narrow it (a channel, a date range, fewer or longer *substring terms)`,
          );
        }
        throw err;
      }
    });
  }

  async networks(source: IrcSource): Promise<NetworkRow[]> {
    const rows = await this.rows<{ id: number; name: string }>('select id, name from irc_networks where source = ? order by name, id', [source]);
    return rows.map((r) => ({ id: Number(r.id), name: r.name }));
  }

  /** Channels of a network in `source`; 422 naming networkId when the network is not in that archive. */
  async channels(source: IrcSource, networkId: number): Promise<ChannelRow[]> {
    const [network] = await this.rows('select id from irc_networks where id = ? and source = ?', [networkId, source]);
    if (!network) throw new AppError('validation_failed', `networkId: no network ${networkId} in the ${source} archive`);
    const rows = await this.rows<{ id: number; name: string; first_date: string | null; last_date: string | null; event_count: string }>(
      `select id, name, to_char(first_at, ${STAMP}) as first_date, to_char(last_at, ${STAMP}) as last_date, event_count
         from irc_channels where network_id = ? order by name, id`,
      [networkId],
    );
    return rows.map((r) => ({ id: Number(r.id), name: r.name, first_date: r.first_date, last_date: r.last_date, event_count: Number(r.event_count) }));
  }

  /** Date precedence: `date`; else `datetime_from`/`datetime_to`; else `date_from`/`date_to` (whole days, inclusive). */
  static timeRange(s: LogSearch): { from: string | null; to: string | null; toExclusive: boolean } {
    if (s.date) return { from: `${s.date} 00:00:00`, to: `${addDays(s.date, 1)} 00:00:00`, toExclusive: true };
    if (s.datetimeFrom || s.datetimeTo) return { from: s.datetimeFrom, to: s.datetimeTo, toExclusive: false };
    if (s.dateFrom || s.dateTo) {
      return { from: s.dateFrom ? `${s.dateFrom} 00:00:00` : null, to: s.dateTo ? `${addDays(s.dateTo, 1)} 00:00:00` : null, toExclusive: true };
    }
    return { from: null, to: null, toExclusive: false };
  }

  /** 422 naming the parameter when `network_id` or `channel_id` names nothing in the search's archive (as /channels does). */
  private async checkIds(s: LogSearch): Promise<void> {
    if (s.networkId !== null) {
      const [n] = await this.rows('select 1 from irc_networks where id = ? and source = ?', [s.networkId, s.source]);
      if (!n) throw new AppError('validation_failed', `network_id: no network ${s.networkId} in the ${s.source} archive`);
    }
    if (s.channelId !== null) {
      const [c] = await this.rows(
        `select 1 from irc_channels c join irc_networks n on n.id = c.network_id where c.id = ? and n.source = ? ${s.networkId !== null ? 'and n.id = ?' : ''}`,
        [s.channelId, s.source, ...(s.networkId !== null ? [s.networkId] : [])],
      );
      if (!c) {
        throw new AppError(
          'validation_failed',
          `channel_id: no channel ${s.channelId} in ${s.networkId !== null ? `network ${s.networkId} of ` : ''}the ${s.source} archive`,
        );
      }
    }
  }

  private async buildFilter(
    s: LogSearch,
    opts: { order: 'asc' | 'desc'; exclusions: boolean },
  ): Promise<{ filter: LogFilter; scope: ScopeChannel[]; networkIds: number[]; prefetched: Prefetched | null } | null> {
    await this.checkIds(s);
    const range = IrcArchiveService.timeRange(s);
    if (range.from && range.to && (range.toExclusive ? range.from >= range.to : range.from > range.to)) {
      const [to, from] = s.datetimeFrom || s.datetimeTo ? ['datetime_to', 'datetime_from'] : ['date_to', 'date_from'];
      throw new AppError('validation_failed', `${to}: the time range ends before it starts (${to} is before ${from})`);
    }
    // The channels in scope, the source's networks and every channel id: one statement (three
    // round trips were a third of a short search's time). For a search that may be answered from
    // the per-term counters (see termCounts), the same statement also finds the term's lexeme (and
    // that of its one excluded term) and the term's months in scope: two or three round trips fewer.
    const countable = termCountable(s, range, opts.exclusions);
    const lexemeSql = (t: SearchTerm) =>
      t.kind === 'token'
        ? { sql: '?::text', bindings: [t.text] }
        : {
            sql: `(select case when cardinality(a) = 1 then a[1] end from (select tsvector_to_array(to_tsvector('simple', irc_fts_text(?))) as a) x)`,
            bindings: [t.text],
          };
    const term = countable ? lexemeSql(countable.term) : null;
    const excluded = countable?.excluded ? lexemeSql(countable.excluded) : null;
    const [catalog] = await this.rows<{
      scope: ScopeChannel[];
      network_ids: number[];
      all_channels: number[];
      lexeme?: string | null;
      excluded_lexeme?: string | null;
      months?: Array<{ month: string; n: string; days: number }>;
    }>(
      `with scope as (
         select c.id, c.name, c.network_id, c.event_count, c.netsplit_count, c.netsplit_leader_count
           from irc_channels c join irc_networks n on n.id = c.network_id
          where n.source = ? ${s.networkId !== null ? 'and n.id = ?' : ''} ${s.channelId !== null ? 'and c.id = ?' : ''} ${s.privateOnly ? 'and c.is_private' : ''}
       )${term ? `, lx as (select ${term.sql} as lexeme${excluded ? `, ${excluded.sql} as excluded_lexeme` : ''})` : ''}
       select coalesce((select json_agg(json_build_object('id', id, 'name', name, 'network_id', network_id, 'event_count', event_count::text,
                                                         'netsplit_count', netsplit_count::text, 'netsplit_leader_count', netsplit_leader_count::text))
                          from scope), '[]') as scope,
              array(select id from irc_networks where source = ? ${s.networkId !== null ? 'and id = ?' : ''}) as network_ids,
              array(select id from irc_channels) as all_channels${
                term
                  ? `,
              (select lexeme from lx) as lexeme${excluded ? ', (select excluded_lexeme from lx) as excluded_lexeme' : ''},
              (select coalesce(json_agg(json_build_object('month', to_char(month, 'YYYY-MM-DD'), 'n', n::text, 'days', days) order by month ${opts.order === 'desc' ? 'desc' : 'asc'}), '[]')
                 from (select month, sum(n) as n, bit_or(days) as days from irc_term_months
                        where term = (select lexeme from lx) and channel_id = any(array(select id from scope)) group by month) m) as months`
                  : ''
              }`,
      [
        s.source,
        ...(s.networkId !== null ? [s.networkId] : []),
        ...(s.channelId !== null ? [s.channelId] : []),
        ...(term ? term.bindings : []),
        ...(excluded ? excluded.bindings : []),
        s.source,
        ...(s.networkId !== null ? [s.networkId] : []),
      ],
    );
    const prefetched: Prefetched | null =
      term && catalog!.months
        ? {
            lexemes: new Map<SearchTerm, string | null>([
              [countable!.term, catalog!.lexeme ?? null],
              ...(countable!.excluded ? [[countable!.excluded, catalog!.excluded_lexeme ?? null] as const] : []),
            ]),
            months: catalog!.months.map((m) => ({ month: m.month, n: Number(m.n), days: Number(m.days) })),
          }
        : null;
    const scope = catalog!.scope;
    if (!scope.length) return null;
    const networkIds = catalog!.network_ids.map(Number);
    const allChannels = catalog!.all_channels.map(Number);
    const channelsByTerm = new Map<SearchTerm, number[]>();
    for (const t of [...s.include, ...s.exclude]) {
      if (t.kind !== 'word' && t.kind !== 'token') continue;
      const names = new Set([t.text, t.text.replace(/^[#&]+/, ''), `#${t.text.replace(/^[#&]+/, '')}`]);
      const ids = scope.filter((c) => names.has(c.name.toLowerCase())).map((c) => Number(c.id));
      if (ids.length) channelsByTerm.set(t, ids);
    }
    const nickKeys = s.nick ? await this.aliases.resolve(s.nick, networkIds) : null;
    const filter: LogFilter = {
      ...channelScope(
        scope.map((c) => Number(c.id)),
        allChannels,
      ),
      include: s.include,
      exclude: s.exclude,
      nickKeys,
      recipient: s.recipient?.toLowerCase() ?? null,
      from: range.from,
      to: range.to,
      toExclusive: range.toExclusive,
      includeNetsplit: s.includeNetsplit,
      bulkNetsplit: s.bulkNetsplit,
      channelsByTerm,
      eventTypes: s.eventTypes,
    };
    return { filter, scope, networkIds, prefetched };
  }

  /** Networks of the search's source (only the given one, when it belongs to that source). */
  private async networkIds(s: LogSearch): Promise<number[]> {
    const rows = await this.rows<{ id: number }>(
      `select id from irc_networks where source = ? ${s.networkId !== null ? 'and id = ?' : ''}`,
      s.networkId !== null ? [s.source, s.networkId] : [s.source],
    );
    return rows.map((r) => Number(r.id));
  }

  /** The person the `nick` filter names (within the source, and the network when one is given), or null. */
  async nickProfile(s: LogSearch): Promise<NickProfile | null> {
    if (!s.nick) return null;
    return (await this.cache.get(searchKey('profile', s), async () => ({ profile: await this.nickProfileNow(s) }))).profile;
  }

  private async nickProfileNow(s: LogSearch): Promise<NickProfile | null> {
    if (!s.nick) return null;
    const networkIds = await this.networkIds(s);
    return this.aliases.profile(s.nick, await this.aliases.resolve(s.nick, networkIds), networkIds);
  }

  async search(s: LogSearch): Promise<LogPage> {
    return this.cache.get(searchKey('page', s), () => this.bounded(() => this.searchNow(s)));
  }

  private async searchNow(s: LogSearch): Promise<LogPage> {
    const built = await this.buildFilter(s, { order: s.order, exclusions: true });
    const nickProfile = s.nick ? (built ? await this.aliases.profile(s.nick, built.filter.nickKeys!, built.networkIds) : await this.nickProfileNow(s)) : null;
    if (!built) return { total: 0, results: [], nickProfile };
    const { filter, scope, prefetched } = built;
    const where = whereClause(filter);
    const dir = s.order === 'desc' ? 'desc' : 'asc';
    let total: number;

    let rows: RawLogRow[];
    const counted = await this.termCounts(filter, s.order, { exclusions: true, prefetched });
    if (counted) {
      // One word (less some excluded terms) and nothing else narrowing: the word's total and the
      // months that hold the page come from irc_term_months; only rows in those months are read.
      // Rows holding the word and an excluded term are subtracted: for one excluded common word
      // and a frequent word they are counted at write time (irc_term_pairs), otherwise where the
      // two meet in the full-text index (a GIN intersection).
      total = counted.total;
      if (filter.exclude.length) {
        let both = await this.pairCount(filter, counted.lexeme, prefetched);
        if (both === null) {
          const scope = whereClause({ ...filter, include: [], exclude: [] });
          const clause = bothTermsClause(filter.include[0]!, filter.exclude);
          const [row] = await this.rows<{ n: string }>(`select count(*) as n from irc_events e where ${clause.sql} and ${scope.sql}`, [
            ...clause.bindings,
            ...scope.bindings,
          ]);
          both = Number(row!.n);
        }
        total -= both;
      }
      rows = [];
      // With exclusions the word's months hold more rows than the search keeps: ask for as many
      // more as the totals say (with a margin), and four times as many again when that was short.
      let want = Math.ceil((s.offset + s.limit) * (filter.exclude.length ? (1.25 * counted.total) / Math.max(1, total) : 1));
      let bound = total > s.offset ? counted.pageBound(want) : null;
      while (bound) {
        const narrowed = whereClause({ ...filter, ...bound.range });
        rows = await this.pageRows(
          `with m as materialized (select e.id, e.occurred_at from irc_events e where ${narrowed.sql})
           select id from m order by occurred_at ${dir}, id ${dir} limit ? offset ?`,
          [...narrowed.bindings, s.limit, s.offset],
          s.order,
        );
        want *= 4;
        bound = rows.length < Math.min(s.limit, total - s.offset) && !bound.complete ? counted.pageBound(want) : null;
      }
    } else if (isExclusionOnly(filter)) {
      // Everything in scope less the rows that match an excluded term (found through the index);
      // the page walks the time index, where nearly every row qualifies.
      const base = whereClause({ ...filter, exclude: [] });
      const neg = anyTermClause(filter.exclude);
      const [row] = await this.rows<{ n: string }>(`select count(*) as n from irc_events e where ${base.sql} and ${neg.sql}`, [
        ...base.bindings,
        ...neg.bindings,
      ]);
      total = counterTotal(scope, filter) - Number(row!.n);
      rows = total > s.offset ? await this.orderedPage(filter, s.limit, s.offset, s.order) : [];
    } else if (hasTextTerms(filter) || (filter.recipient && !filter.nickKeys)) {
      // Full-text (bitmap) scans and recipient lookups: find the matches once, then count them and
      // cut the page. Materialising also keeps the planner from walking the whole time index in
      // the hope of finding `limit` matches early.
      // The page's rows come with the count: one row carrying only the total when the page is empty.
      const found = await this.rows<RawLogRow & { total: string; rn: string | null }>(
        `with m as materialized (select e.id, e.occurred_at from irc_events e where ${where.sql}),
              p as (select id from m order by occurred_at ${dir}, id ${dir} limit ? offset ?)
         select t.total, r.* from (select count(*) as total from m) t
           left join lateral (select ${ROW_COLUMNS}, row_number() over (order by e.occurred_at ${dir}, e.id ${dir}) as rn
                                from p join irc_events e on e.id = p.id join irc_channels c on c.id = e.channel_id) r on true
          order by r.rn`,
        [...where.bindings, s.limit, s.offset],
      );
      total = Number(found[0]!.total);
      rows = found.filter((r) => r.rn !== null);
    } else {
      // Ordered index scans: the count reads an index alone; the page stops after offset+limit entries.
      if (isSelective(filter)) {
        const [row] = await this.rows<{ n: string }>(`select count(*) as n from irc_events e where ${where.sql}`, where.bindings);
        total = Number(row!.n);
      } else {
        total = counterTotal(scope, filter);
      }
      rows = total > s.offset ? await this.orderedPage(filter, s.limit, s.offset, s.order) : [];
    }
    return { total, results: await this.present(rows, filter.bulkNetsplit && filter.includeNetsplit), nickProfile };
  }

  /**
   * One page in (occurred_at, id) order without full-text terms. With a nick filter each of the
   * person's nicks is read in order from the nick index and the runs are merged, so the planner
   * cannot choose to walk the whole time index looking for a nick that is rare in it.
   */
  private async orderedPage(filter: LogFilter, limit: number, offset: number, order: 'asc' | 'desc'): Promise<RawLogRow[]> {
    const dir = order === 'desc' ? 'desc' : 'asc';
    if (filter.nickKeys) {
      const branches = filter.nickKeys.map((key) => whereClause({ ...filter, nickKeys: [key] }));
      return this.pageRows(
        `select id from (${branches.map((b) => `(select e.id, e.occurred_at from irc_events e where ${b.sql} order by e.occurred_at ${dir}, e.id ${dir} limit ?)`).join(' union all ')}) u
          order by occurred_at ${dir}, id ${dir} limit ? offset ?`,
        [...branches.flatMap((b) => [...b.bindings, offset + limit]), limit, offset],
        order,
      );
    }
    const where = whereClause(filter);
    return this.pageRows(
      `select e.id from irc_events e where ${where.sql} order by e.occurred_at ${dir}, e.id ${dir} limit ? offset ?`,
      [...where.bindings, limit, offset],
      order,
    );
  }

  /**
   * The rows of a page whose ids `idsSql` selects (a column `id`, at most one page): read with
   * the page in the same statement, in (occurred_at, id) order.
   */
  private async pageRows(idsSql: string, bindings: unknown[], order: 'asc' | 'desc'): Promise<RawLogRow[]> {
    const dir = order === 'desc' ? 'desc' : 'asc';
    return this.rows<RawLogRow>(
      `select ${ROW_COLUMNS} from (${idsSql}) p join irc_events e on e.id = p.id join irc_channels c on c.id = e.channel_id
        order by e.occurred_at ${dir}, e.id ${dir}`,
      bindings,
    );
  }

  /** `aggregate=dates`: how many distinct UTC days the matching rows fall on, and their span. */
  async aggregateDates(s: LogSearch): Promise<DateAggregate> {
    return this.cache.get(searchKey('dates', s), () => this.bounded(() => this.aggregateDatesNow(s)));
  }

  private async aggregateDatesNow(s: LogSearch): Promise<DateAggregate> {
    const built = await this.buildFilter(s, { order: 'asc', exclusions: false });
    if (!built) return { total: 0, date_count: 0, first_date: null, last_date: null, span_days: 0 };
    const counted = await this.termCounts(built.filter, 'asc', { exclusions: false, prefetched: built.prefetched });
    if (counted) return counted.dates();
    const where = whereClause(built.filter);
    const [row] = await this.rows<{ total: string; date_count: string; first_date: string | null; last_date: string | null }>(
      `select count(*) as total, count(distinct e.occurred_at::date) as date_count,
              to_char(min(e.occurred_at), 'YYYY-MM-DD') as first_date, to_char(max(e.occurred_at), 'YYYY-MM-DD') as last_date
         from irc_events e where ${where.sql}`,
      where.bindings,
    );
    const first = row!.first_date;
    const last = row!.last_date;
    const span = first && last ? Math.round((Date.parse(`${last}T00:00:00Z`) - Date.parse(`${first}T00:00:00Z`)) / 86_400_000) + 1 : 0;
    return { total: Number(row!.total), date_count: Number(row!.date_count), first_date: first, last_date: last, span_days: span };
  }

  /**
   * For a search that is one word (or token) and nothing else but channel scope, with netsplit
   * rows hidden: its per-month counts from irc_term_months, or null when the search is not of that
   * kind (or the word is more than one lexeme).
   */
  private async termCounts(f: LogFilter, order: 'asc' | 'desc', opts: { exclusions: boolean; prefetched: Prefetched | null }): Promise<TermCounts | null> {
    if (f.include.length !== 1 || f.nickKeys || f.recipient || f.from || f.to || f.eventTypes || f.includeNetsplit) return null;
    if (f.exclude.length && (!opts.exclusions || f.exclude.some((x) => x.kind === 'substring' || isPartsToken(x) || f.channelsByTerm.has(x)))) return null;
    const t = f.include[0]!;
    if ((t.kind !== 'word' && t.kind !== 'token') || isPartsToken(t) || f.channelsByTerm.has(t)) return null;
    const lexeme = await this.lexemeOf(t, opts.prefetched);
    if (lexeme === null) return null;
    if (opts.prefetched) return new TermCounts(lexeme, opts.prefetched.months, order);
    const scope = counterScope(f);
    const months = await this.rows<{ month: string; n: string; days: number }>(
      `select to_char(month, 'YYYY-MM-DD') as month, sum(n) as n, bit_or(days) as days
         from irc_term_months where term = ? ${scope.sql} group by month order by month ${order === 'desc' ? 'desc' : 'asc'}`,
      [lexeme, ...scope.bindings],
    );
    return new TermCounts(
      lexeme,
      months.map((m) => ({ month: m.month, n: Number(m.n), days: Number(m.days) })),
      order,
    );
  }

  /**
   * Rows in scope holding both `lexeme` (a frequent term) and the search's one excluded word when
   * that is a common term, from irc_term_pairs; null when the pair is not counted there.
   */
  private async pairCount(f: LogFilter, lexeme: string, prefetched: Prefetched | null): Promise<number | null> {
    const x = f.exclude.length === 1 ? f.exclude[0]! : null;
    if (!x || (x.kind !== 'word' && x.kind !== 'token')) return null;
    const common = await this.lexemeOf(x, prefetched);
    if (common === null || common === lexeme) return null;
    const scope = counterScope(f);
    // The list and the counts are read in one snapshot: a listed pair always has all its counts.
    const [row] = await this.rows<{ counted: boolean; n: string }>(
      `select exists (select 1 from irc_frequent_terms where term = ? and common) and exists (select 1 from irc_frequent_terms where term = ?) as counted,
              (select coalesce(sum(n), 0) from irc_term_pairs where common = ? and term = ? ${scope.sql}) as n`,
      [common, lexeme, common, lexeme, ...scope.bindings],
    );
    return row?.counted ? Number(row.n) : null;
  }

  /** The one lexeme a word or token term matches, or null (a word of several lexemes). */
  private async lexemeOf(t: SearchTerm, prefetched: Prefetched | null): Promise<string | null> {
    if (t.kind === 'token') return t.text;
    const known = prefetched?.lexemes.get(t);
    if (known !== undefined) return known;
    const [v] = await this.rows<{ lexemes: string[] }>(`select tsvector_to_array(to_tsvector('simple', irc_fts_text(?))) as lexemes`, [t.text]);
    return v?.lexemes.length === 1 ? v.lexemes[0]! : null;
  }

  /** Rows as the API shows them; with `collapse`, a netsplit burst's leader carries the burst's size and nicks. */
  private async present(rows: RawLogRow[], collapse: boolean): Promise<LogRow[]> {
    if (!rows.length) return [];
    const bursts = new Map<string, { n: string; nicks: string[]; last_at: string }>();
    const leaders = rows.filter((r) => collapse && r.netsplit_leader && r.netsplit_group !== null);
    if (leaders.length) {
      const groups = await this.rows<{ g: string; n: string; nicks: string[]; last_at: string }>(
        `select netsplit_group as g, count(*) as n, (array_agg(nick order by occurred_at, id))[1:${NETSPLIT_NICKS_SHOWN}] as nicks,
                to_char(max(occurred_at), ${STAMP}) as last_at
           from irc_events where netsplit_group = any(?::bigint[]) and channel_id = any(?::int[]) group by netsplit_group`,
        [leaders.map((r) => r.netsplit_group), [...new Set(leaders.map((r) => r.channel_id))]],
      );
      for (const g of groups) bursts.set(String(g.g), g);
    }
    return rows.map((r) => {
      const row: LogRow = {
        id: Number(r.id),
        event_type: r.event_type,
        occurred_at: r.occurred_at,
        nick: r.nick,
        message_text: r.message_text,
        target: r.target,
        to_nick: r.to_nick,
        channel_id: Number(r.channel_id),
        channel_name: r.channel_name,
        network_id: Number(r.network_id),
      };
      const burst = r.netsplit_group !== null ? bursts.get(String(r.netsplit_group)) : undefined;
      if (burst) Object.assign(row, { netsplit_count: Number(burst.n), netsplit_nicks: burst.nicks.filter(Boolean), netsplit_last_at: burst.last_at });
      return row;
    });
  }
}

/** A word's rows per month (in the search's order) and the days of each month it occurs on. */
class TermCounts {
  readonly total: number;
  constructor(
    readonly lexeme: string,
    private readonly months: Array<{ month: string; n: number; days: number }>,
    private readonly order: 'asc' | 'desc',
  ) {
    this.total = months.reduce((a, m) => a + m.n, 0);
  }

  /**
   * The time range (from the first match on) that holds the first `rows` matches; `complete` when
   * it reaches the last month with matches. Null when there are none.
   */
  pageBound(rows: number): { range: Pick<LogFilter, 'from' | 'to' | 'toExclusive'>; complete: boolean } | null {
    let seen = 0;
    for (const m of this.months) {
      seen += m.n;
      const last = m === this.months.at(-1);
      if (seen >= rows || last) {
        const range =
          this.order === 'desc'
            ? { from: `${m.month} 00:00:00`, to: null, toExclusive: false }
            : { from: null, to: `${addMonth(m.month)} 00:00:00`, toExclusive: true };
        return { range, complete: last };
      }
    }
    return null;
  }

  dates(): DateAggregate {
    let count = 0;
    let first: string | null = null;
    let last: string | null = null;
    for (const m of this.months) {
      if (!m.days) continue;
      for (let d = 0; d < 31; d += 1) {
        if (!(m.days & (1 << d))) continue;
        count += 1;
        const day = `${m.month.slice(0, 8)}${String(d + 1).padStart(2, '0')}`;
        if (first === null || day < first) first = day;
        if (last === null || day > last) last = day;
      }
    }
    const span = first && last ? Math.round((Date.parse(`${last}T00:00:00Z`) - Date.parse(`${first}T00:00:00Z`)) / 86_400_000) + 1 : 0;
    return { total: this.total, date_count: count, first_date: first, last_date: last, span_days: span };
  }
}

/** `YYYY-MM-01` → the first day of the next month. */
function addMonth(month: string): string {
  const d = new Date(`${month}T00:00:00Z`);
  d.setUTCMonth(d.getUTCMonth() + 1);
  return d.toISOString().slice(0, 10);
}

/** A log row as the page statements read it (ROW_COLUMNS). */
type RawLogRow = LogRow & { netsplit_group: string | null; netsplit_leader: boolean };

/** The columns of a page's rows, over `irc_events e join irc_channels c`. */
const ROW_COLUMNS = `e.id, e.event_type, to_char(e.occurred_at, ${STAMP}) as occurred_at, e.nick, e.message_text, e.target, e.to_nick,
       e.channel_id, c.name as channel_name, c.network_id, e.netsplit_group, e.netsplit_leader`;

/** What the catalog statement read ahead for a search the per-term counters may answer (see termCountable). */
interface Prefetched {
  /** The one lexeme of the search's term (and of its one excluded term), or null: several lexemes. */
  lexemes: Map<SearchTerm, string | null>;
  /** The term's rows per month in scope, in the search's order. */
  months: Array<{ month: string; n: number; days: number }>;
}

/**
 * The search's shape allows an answer from the per-term counters (termCounts checks the rest,
 * which needs the channels in scope): its term, and its one excluded word or token when it has one.
 */
function termCountable(
  s: LogSearch,
  range: { from: string | null; to: string | null },
  exclusions: boolean,
): { term: SearchTerm; excluded: SearchTerm | null } | null {
  if (s.include.length !== 1 || s.nick || s.recipient || range.from || range.to || s.eventTypes || s.includeNetsplit) return null;
  // A token matched by its parts (search-terms.ts) is no one lexeme: the counters do not count it.
  if (s.exclude.length && (!exclusions || s.exclude.some((x) => x.kind === 'substring' || isPartsToken(x)))) return null;
  const term = s.include[0]!;
  if ((term.kind !== 'word' && term.kind !== 'token') || isPartsToken(term)) return null;
  const x = s.exclude.length === 1 ? s.exclude[0]! : null;
  return { term, excluded: x && (x.kind === 'word' || x.kind === 'token') ? x : null };
}

interface ScopeChannel {
  id: number;
  name: string;
  network_id: number;
  event_count: string;
  netsplit_count: string;
  netsplit_leader_count: string;
}

/** The channel condition in its cheaper form: none (every channel), the channels in scope, or those out of it. */
function channelScope(inScope: number[], all: number[]): Pick<LogFilter, 'channelIds' | 'excludedChannelIds'> {
  if (inScope.length === all.length) return { channelIds: null, excludedChannelIds: null };
  const set = new Set(inScope);
  const out = all.filter((id) => !set.has(id));
  return inScope.length > 1 && out.length < inScope.length ? { channelIds: null, excludedChannelIds: out } : { channelIds: inScope, excludedChannelIds: null };
}

/** The channel condition of a search, over a counter table's channel_id. */
function counterScope(f: LogFilter): { sql: string; bindings: unknown[] } {
  if (f.channelIds) return { sql: 'and channel_id = any(?::int[])', bindings: [f.channelIds] };
  if (f.excludedChannelIds?.length) return { sql: 'and channel_id <> all(?::int[])', bindings: [f.excludedChannelIds] };
  return { sql: '', bindings: [] };
}

/** Rows in scope from the counters kept at write time, less the netsplit rows the filter hides. */
function counterTotal(scope: ScopeChannel[], filter: LogFilter): number {
  return scope.reduce(
    (n, c) =>
      n +
      Number(c.event_count) -
      (filter.includeNetsplit ? (filter.bulkNetsplit ? Number(c.netsplit_count) - Number(c.netsplit_leader_count) : 0) : Number(c.netsplit_count)),
    0,
  );
}
