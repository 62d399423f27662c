/** The SQL of the archive's frequent and common terms and their pair counts (common-terms.ts). */
import { LONG_STATEMENT } from '../db/orm.js';
import { sql, type Db } from '../db/sql.js';

/**
 * FROM and WHERE that give, for each row of `from` (rows with search_vector and event_type, named
 * `alias`), one (h.lexeme: common, l.lexeme: frequent) per pair it holds. The one rule for what is
 * counted.
 */
export function pairsOf(alias: string, from = alias): string {
  return `from ${from}
     cross join lateral unnest(${alias}.search_vector) h join irc_frequent_terms c on c.term = h.lexeme and c.common
     cross join lateral unnest(${alias}.search_vector) l join irc_frequent_terms f on f.term = l.lexeme
    where ${alias}.event_type not in ('NETSPLIT', 'NETMERGE') and l.lexeme <> h.lexeme`;
}

type TermRow = { term: string; common: boolean };
type None = Record<string, never>;

/** The pairs a term now takes part in, on side `h` (as the common term) or `l` (as the frequent one), counted from the rows holding it. */
const countPairsOf = (side: 'h' | 'l') =>
  sql<{ query: string; term: string }>(
    `insert into irc_term_pairs (common, term, channel_id, n)
     select h.lexeme, l.lexeme, e.channel_id, count(*) ${pairsOf('e', 'irc_events e')} and e.search_vector @@ :query::tsquery and ${side}.lexeme = :term
      group by 1, 2, 3`,
  );

const Q = {
  all: sql<None, TermRow>('select term, common from irc_frequent_terms order by term'),
  places: sql<None, TermRow>('select term, common from irc_frequent_terms'),
  placeOf: sql<{ term: string }, TermRow>('select term, common from irc_frequent_terms where term = :term'),
  /** Not cut at DATABASE_WAIT_TIMEOUT_MS: a recount. */
  noTimeout: sql<None>('set local statement_timeout = 0'),
  workMem: sql<None>(`set local work_mem = '256MB'`),
  /**
   * SHARE ROW EXCLUSIVE on irc_events: granted once the transactions writing rows have ended, it
   * keeps inserts and deletes (and another refresh) waiting until this transaction ends, and lets
   * reads through. Taken before irc_frequent_terms changes, so a writer that already holds its row
   * lock and then reads the list is never waited on crosswise.
   */
  lockWriters: sql<None>('lock table irc_events in share row exclusive mode'),
  dropPairsAsCommon: sql<{ term: string }>('delete from irc_term_pairs where common = :term'),
  dropPairsAsFrequent: sql<{ term: string }>('delete from irc_term_pairs where term = :term'),
  dropTerm: sql<{ term: string }>('delete from irc_frequent_terms where term = :term'),
  place: sql<{ term: string; common: boolean }>(
    'insert into irc_frequent_terms (term, common) values (:term, :common) on conflict (term) do update set common = excluded.common',
  ),
  countPairs: { h: countPairsOf('h'), l: countPairsOf('l') },
  dropAllPairs: sql<None>('delete from irc_term_pairs'),
  dropAllTerms: sql<None>('delete from irc_frequent_terms'),
  placeAll: sql<{ terms: string[]; common: boolean[] }>(
    `insert into irc_frequent_terms (term, common) select * from unnest(:terms::text[], :common::boolean[])`,
  ),
  countAllPairs: sql<None>(
    `insert into irc_term_pairs (common, term, channel_id, n) select h.lexeme, l.lexeme, e.channel_id, count(*) ${pairsOf('e', 'irc_events e')} group by 1, 2, 3`,
  ),
  estimatedRows: sql<None, { rows: number }>(`select reltuples::float8 as rows from pg_class where oid = 'irc_events'::regclass`),
  /** The `count` lexemes held by the most rows of a SYSTEM sample of `percent` of irc_events' pages (REPEATABLE). */
  sampleTop: sql<{ percent: number; count: number }, { term: string }>(
    `select l.lexeme as term
       from irc_events e tablesample system (:percent) repeatable (0) cross join lateral unnest(e.search_vector) l
      where e.event_type not in ('NETSPLIT', 'NETMERGE')
      group by 1 order by count(*) desc, 1 limit :count`,
  ),
};

export type Place = 'common' | 'frequent' | null;

export const CommonTermsRows = {
  async list(db: Db) {
    return Q.all.rows(db, {});
  },
  /** Every term's place, or `term`'s alone. */
  async places(db: Db, term?: string): Promise<Map<string, Place>> {
    const rows = term === undefined ? await Q.places.rows(db, {}) : await Q.placeOf.rows(db, { term });
    return new Map(rows.map((r) => [r.term, r.common ? 'common' : 'frequent']));
  },
  /** The start of a recount's transaction: no statement timeout, and the writers held back (Q.lockWriters). */
  async beginRecount(trx: Db, opts: { workMem?: boolean } = {}) {
    await Q.noTimeout.run(trx, {});
    await Q.lockWriters.run(trx, {}, LONG_STATEMENT);
    if (opts.workMem) await Q.workMem.run(trx, {});
  },
  /** Moves `term` from `was` to `to`, its pair counts with it (`query`: its lexeme as a tsquery). */
  async move(trx: Db, term: string, query: string, was: Place, to: Place) {
    if (was === 'common') await Q.dropPairsAsCommon.run(trx, { term });
    if (to === null) await Q.dropPairsAsFrequent.run(trx, { term });
    if (to === null) await Q.dropTerm.run(trx, { term });
    else await Q.place.run(trx, { term, common: to === 'common' });
    const sides = [...(to === 'common' && was !== 'common' ? (['h'] as const) : []), ...(to !== null && was === null ? (['l'] as const) : [])];
    for (const side of sides) await Q.countPairs[side].run(trx, { query, term }, LONG_STATEMENT);
  },
  /** Every place and every pair count anew. */
  async replaceAll(trx: Db, wanted: Map<string, Place>) {
    await Q.dropAllPairs.run(trx, {});
    await Q.dropAllTerms.run(trx, {});
    if (!wanted.size) return;
    await Q.placeAll.run(trx, { terms: [...wanted.keys()], common: [...wanted.values()].map((p) => p === 'common') });
    await Q.countAllPairs.run(trx, {}, LONG_STATEMENT);
  },
  async estimatedRows(db: Db): Promise<number> {
    return (await Q.estimatedRows.first(db, {}))?.rows ?? -1;
  },
  async sampleTop(db: Db, percent: number, count: number): Promise<string[]> {
    return (await Q.sampleTop.rows(db, { percent, count })).map((r) => r.term);
  },
};
