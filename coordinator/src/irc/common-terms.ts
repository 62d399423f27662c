/**
 * The archive's common terms: the lexemes for which the event store keeps pair counts
 * (irc_term_pair_months: how many rows of a channel-month hold both a common lexeme and another
 * one). A search for a word less a common word (`q=there -i`) is then counted from counters:
 * counting the rows that hold both through the full-text index would visit a heap page per row,
 * tens of thousands of pages for two frequent words.
 *
 * Only common words need this: when the excluded word is rarer, the rows holding both words are
 * few and the index counts them quickly.
 */
import type { Knex } from 'knex';
import type { Orm } from '../db/orm.js';
import { lexemeQuery } from './search-terms.js';

/** How many of the archive's most frequent lexemes are common terms. */
export const COMMON_TERMS = 64;

export interface CommonTermsChange {
  /** The common terms after the refresh, most frequent first. */
  terms: string[];
  added: string[];
  removed: string[];
}

export class IrcCommonTerms {
  constructor(private readonly orm: Orm) {}

  private knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  /** The current common terms, in name order. */
  async list(): Promise<string[]> {
    const res = await this.knex().raw<{ rows: Array<{ term: string }> }>('select term from irc_common_terms order by term');
    return res.rows.map((r) => r.term);
  }

  /**
   * Makes the common terms the archive's `count` most frequent lexemes.
   * Each lexeme that joins gets its pair counts from the rows that hold it, and each that leaves
   * loses them, in one transaction per lexeme that also changes the list: it first takes a lock
   * on irc_events that waits for the writers in progress and holds new ones back (searches go
   * on), so every row is counted exactly once, by this transaction or by the writer that inserts
   * it later and reads the new list. A lexeme with many rows holds writers back for a while
   * (about 10 s per million rows holding it); after the first refresh the list rarely changes.
   */
  async refresh(count = COMMON_TERMS): Promise<CommonTermsChange> {
    const knex = this.knex();
    const wanted = await this.mostFrequent(count);
    const current = new Set(await this.list());
    const added = wanted.filter((t) => !current.has(t));
    const keep = new Set(wanted);
    const removed = [...current].filter((t) => !keep.has(t));
    for (const term of removed) {
      await knex.transaction(async (trx) => {
        await lockWriters(trx);
        await trx.raw('delete from irc_term_pair_months where common = ?', [term]);
        await trx.raw('delete from irc_common_terms where term = ?', [term]);
      });
    }
    for (const term of added) {
      await knex.transaction(async (trx) => {
        await lockWriters(trx);
        const res = await trx.raw<{ rowCount: number }>('insert into irc_common_terms (term) values (?) on conflict do nothing', [term]);
        // Another refresh added it meanwhile (with its counts).
        if (!res.rowCount) return;
        await trx.raw('delete from irc_term_pair_months where common = ?', [term]);
        await trx.raw(
          `insert into irc_term_pair_months (common, term, channel_id, month, n)
           select ?, l.lexeme, e.channel_id, date_trunc('month', e.occurred_at)::date, count(*)
             from irc_events e cross join lateral unnest(e.search_vector) l
            where e.search_vector @@ ?::tsquery and e.event_type not in ('NETSPLIT', 'NETMERGE') and l.lexeme <> ?
            group by 2, 3, 4`,
          [term, lexemeQuery(term), term],
        );
      });
    }
    return { terms: wanted, added, removed };
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

/** Rows the choice of common terms is made from (the whole table when it is smaller). */
const SAMPLE_ROWS = 50_000;

/**
 * SHARE ROW EXCLUSIVE on irc_events: granted once the transactions writing rows have ended, it
 * keeps inserts and deletes (and another refresh) waiting until this transaction ends, and lets
 * reads through. Taken before irc_common_terms changes, so a writer that already holds its row
 * lock and then reads the list is never waited on crosswise.
 */
async function lockWriters(trx: Knex.Transaction): Promise<void> {
  await trx.raw('lock table irc_events in share row exclusive mode');
}
