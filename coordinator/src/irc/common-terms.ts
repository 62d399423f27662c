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
import type { Orm } from '../db/orm.js';
import { dbOf } from '../db/sql.js';
import { CommonTermsRows, type Place } from './common-terms-repository.js';
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

export class IrcCommonTerms {
  constructor(private readonly orm: Orm) {}

  private knex(): Knex {
    return dbOf(this.orm.em);
  }

  /** The current common and frequent terms, each in name order. */
  async list(): Promise<{ common: string[]; frequent: string[] }> {
    const rows = await CommonTermsRows.list(this.knex());
    return { common: rows.filter((r) => r.common).map((r) => r.term), frequent: rows.map((r) => r.term) };
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
    const current = await CommonTermsRows.places(this.knex());
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
        await CommonTermsRows.beginRecount(trx);
        // Read again under the lock: another refresh may have moved it meanwhile.
        const was = (await CommonTermsRows.places(trx, term)).get(term) ?? null;
        const to = wanted.get(term) ?? null;
        if (was === to) return;
        await CommonTermsRows.move(trx, term, lexemeQuery(term), was, to);
      });
    }
  }

  /** Every term's place and every pair count anew, in one transaction and one pass over the rows. */
  private async rebuild(wanted: Map<string, Place>): Promise<void> {
    await this.knex().transaction(async (trx) => {
      await CommonTermsRows.beginRecount(trx, { workMem: true });
      await CommonTermsRows.replaceAll(trx, wanted);
    });
  }

  /**
   * The `count` lexemes held by the most rows (NETSPLIT/NETMERGE aside), from a sample of about
   * SAMPLE_ROWS rows: ranking every term by irc_term_months would read all of it (tens of millions
   * of rows for ten million messages). The sample is a fixed set of the table's pages (SYSTEM
   * sampling, REPEATABLE), so refreshes agree with each other unless the rows have changed.
   */
  private async mostFrequent(count: number): Promise<string[]> {
    const rows = await CommonTermsRows.estimatedRows(this.knex());
    const percent = rows > SAMPLE_ROWS ? Math.max(0.01, (100 * SAMPLE_ROWS) / rows) : 100;
    return CommonTermsRows.sampleTop(this.knex(), percent, count);
  }
}
