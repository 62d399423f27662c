/**
 * The archive's frequent and common terms, and the pair counts kept for them (irc_term_pairs: how
 * many rows of a channel hold both a common lexeme and a frequent one). A search for a frequent
 * word less a common word (`q=there -i`) is then counted from counters: counting the rows that
 * hold both through the full-text index would visit a heap page per row, tens of thousands of
 * pages when both words are frequent.
 *
 * Only such pairs need it: when either word is rarer, the rows holding both are few and the index
 * counts them quickly.
 */
import type { Knex } from 'knex';
import { LONG_STATEMENT, type Orm } from '../db/orm.js';
import { IrcArchiveChanges } from './archive-changes.js';
import { lexemeQuery } from './search-terms.js';

/** How many of the archive's most frequent lexemes are frequent terms (the searched word of a counted pair). */
export const FREQUENT_TERMS = 512;
/** How many of those, the most frequent, are common terms (the excluded word of a counted pair). */
export const COMMON_TERMS = 32;
/** Rows the choice is made from (the whole table when it is smaller). */
const SAMPLE_ROWS = 50_000;
/** More changes than this at once (a first choice, a much changed archive): all counts are recounted in one pass. */
const REBUILD_OVER = 64;

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

export interface CommonTermsChange {
  /** The common terms after the refresh, most frequent first. */
  common: string[];
  /** How many frequent terms there are (the common ones included). */
  frequent: number;
  /** Terms whose place changed (joined, left, became or stopped being common). */
  changed: number;
  /** True when every count was recounted in one pass. */
  rebuilt: boolean;
}

type Place = 'common' | 'frequent' | null;

export class IrcCommonTerms {
  constructor(private readonly orm: Orm) {}

  private knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  /** The current common and frequent terms, each in name order. */
  async list(): Promise<{ common: string[]; frequent: string[] }> {
    const res = await this.knex().raw<{ rows: Array<{ term: string; common: boolean }> }>('select term, common from irc_frequent_terms order by term');
    return { common: res.rows.filter((r) => r.common).map((r) => r.term), frequent: res.rows.map((r) => r.term) };
  }

  /**
   * Makes the frequent and common terms the archive's `frequent` and `common` most frequent
   * lexemes. Every change runs in a transaction that first takes a lock on irc_events that waits
   * for the writers in progress and holds new ones back (searches go on), so every row is counted
   * exactly once: by that transaction, or by the writer that inserts it later and reads the new
   * list. A term that changes place is counted from the rows that hold it, one term per
   * transaction; many changes at once recount everything in one pass over the archive, which
   * holds writers back longer (see the bench README for a 10-million-row archive).
   */
  async refresh(opts: { frequent?: number; common?: number } = {}): Promise<CommonTermsChange> {
    const ranked = await this.mostFrequent(opts.frequent ?? FREQUENT_TERMS);
    const commonCount = opts.common ?? COMMON_TERMS;
    const wanted = new Map<string, Place>(ranked.map((t, i) => [t, i < commonCount ? 'common' : 'frequent']));
    const current = await this.places(this.knex());
    const changed = [...new Set([...wanted.keys(), ...current.keys()])].filter((t) => (wanted.get(t) ?? null) !== (current.get(t) ?? null));
    const result = { common: ranked.slice(0, commonCount), frequent: ranked.length, changed: changed.length, rebuilt: false };
    // The pair counts answer some searches' totals (archive-service.ts): cached answers go too.
    if (changed.length > REBUILD_OVER) {
      try {
        await this.rebuild(wanted);
      } finally {
        IrcArchiveChanges.of(this.orm).changed();
      }
      return { ...result, rebuilt: true };
    }
    // try/finally: the terms recounted before a failure stay committed.
    try {
      await this.recount(changed, wanted);
    } finally {
      if (changed.length) IrcArchiveChanges.of(this.orm).changed();
    }
    return result;
  }

  /** Moves each of `changed` to its wanted place, one term per transaction. */
  private async recount(changed: string[], wanted: Map<string, Place>): Promise<void> {
    for (const term of changed) {
      await this.knex().transaction(async (trx) => {
        await trx.raw('set local statement_timeout = 0'); // a recount: not cut at DATABASE_WAIT_TIMEOUT_MS
        await lockWriters(trx);
        // Read again under the lock: another refresh may have moved it meanwhile.
        const was = (await this.places(trx, term)).get(term) ?? null;
        const to = wanted.get(term) ?? null;
        if (was === to) return;
        if (was === 'common') await trx.raw('delete from irc_term_pairs where common = ?', [term]);
        if (to === null) await trx.raw('delete from irc_term_pairs where term = ?', [term]);
        if (to === null) await trx.raw('delete from irc_frequent_terms where term = ?', [term]);
        else
          await trx.raw('insert into irc_frequent_terms (term, common) values (?, ?) on conflict (term) do update set common = excluded.common', [
            term,
            to === 'common',
          ]);
        // The pairs it now takes part in, counted from the rows holding it.
        const sides = [...(to === 'common' && was !== 'common' ? ['h'] : []), ...(to !== null && was === null ? ['l'] : [])];
        for (const side of sides) {
          await trx
            .raw(
              `insert into irc_term_pairs (common, term, channel_id, n)
             select h.lexeme, l.lexeme, e.channel_id, count(*) ${pairsOf('e', 'irc_events e')} and e.search_vector @@ ?::tsquery and ${side}.lexeme = ?
              group by 1, 2, 3`,
              [lexemeQuery(term), term],
            )
            .options(LONG_STATEMENT);
        }
      });
    }
  }

  /** Every term's place and every pair count anew, in one transaction and one pass over the rows. */
  private async rebuild(wanted: Map<string, Place>): Promise<void> {
    await this.knex().transaction(async (trx) => {
      await trx.raw('set local statement_timeout = 0'); // a recount: not cut at DATABASE_WAIT_TIMEOUT_MS
      await lockWriters(trx);
      await trx.raw(`set local work_mem = '256MB'`);
      await trx.raw('delete from irc_term_pairs');
      await trx.raw('delete from irc_frequent_terms');
      if (!wanted.size) return;
      await trx.raw(`insert into irc_frequent_terms (term, common) select * from unnest(?::text[], ?::boolean[])`, [
        [...wanted.keys()],
        [...wanted.values()].map((p) => p === 'common'),
      ]);
      await trx
        .raw(
          `insert into irc_term_pairs (common, term, channel_id, n) select h.lexeme, l.lexeme, e.channel_id, count(*) ${pairsOf('e', 'irc_events e')} group by 1, 2, 3`,
        )
        .options(LONG_STATEMENT);
    });
  }

  private async places(db: Knex | Knex.Transaction, term?: string): Promise<Map<string, Place>> {
    const res = await db.raw<{ rows: Array<{ term: string; common: boolean }> }>(
      `select term, common from irc_frequent_terms ${term === undefined ? '' : 'where term = ?'}`,
      term === undefined ? [] : [term],
    );
    return new Map(res.rows.map((r) => [r.term, r.common ? 'common' : 'frequent']));
  }

  /**
   * The `count` lexemes held by the most rows (NETSPLIT/NETMERGE aside), from a sample of about
   * SAMPLE_ROWS rows: ranking every term by irc_term_months would read all of it (tens of millions
   * of rows for ten million messages). The sample is a fixed set of the table's pages (SYSTEM
   * sampling, REPEATABLE), so refreshes agree with each other unless the rows have changed.
   */
  private async mostFrequent(count: number): Promise<string[]> {
    const [size] = (
      await this.knex().raw<{ rows: Array<{ rows: number }> }>(`select reltuples::float8 as rows from pg_class where oid = 'irc_events'::regclass`)
    ).rows;
    const rows = size?.rows ?? -1;
    const percent = rows > SAMPLE_ROWS ? Math.max(0.01, (100 * SAMPLE_ROWS) / rows) : 100;
    const res = await this.knex().raw<{ rows: Array<{ term: string }> }>(
      `select l.lexeme as term
         from irc_events e tablesample system (?) repeatable (0) cross join lateral unnest(e.search_vector) l
        where e.event_type not in ('NETSPLIT', 'NETMERGE')
        group by 1 order by count(*) desc, 1 limit ?`,
      [percent, count],
    );
    return res.rows.map((r) => r.term);
  }
}

/**
 * SHARE ROW EXCLUSIVE on irc_events: granted once the transactions writing rows have ended, it
 * keeps inserts and deletes (and another refresh) waiting until this transaction ends, and lets
 * reads through. Taken before irc_frequent_terms changes, so a writer that already holds its row
 * lock and then reads the list is never waited on crosswise.
 */
async function lockWriters(trx: Knex.Transaction): Promise<void> {
  await trx.raw('lock table irc_events in share row exclusive mode').options(LONG_STATEMENT);
}
