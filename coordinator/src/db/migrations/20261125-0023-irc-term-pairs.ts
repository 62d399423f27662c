import { Migration } from '@mikro-orm/migrations';

/**
 * Counts of words met together with the archive's most common words, so that a search for a word
 * less a common one (`q=there -i`) is counted without visiting a heap page for every row that
 * holds both (PostgreSQL reads each such page to check the row's visibility).
 *
 * irc_common_terms: the lexemes pair counts are kept for, the archive's most frequent ones as
 * IrcCommonTerms.refresh last chose them (after imports, on the maintenance queue, and with
 * `irc:common-terms`). A lexeme and all its pair counts come and go in one transaction.
 *
 * irc_term_pair_months: per common lexeme, other lexeme, channel and month, how many rows (other
 * than NETSPLIT/NETMERGE) hold both. Kept at write time beside irc_term_months by the event
 * store, recounted by deletes and reverts. Both start empty: the first refresh fills them.
 */
export class Migration20261125002300IrcTermPairs extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table irc_common_terms (
        term text primary key,
        added_at timestamptz not null default now()
      );`);
    this.addSql(`
      create table irc_term_pair_months (
        common text not null,
        term text not null,
        channel_id integer not null references irc_channels (id) on delete cascade,
        month date not null,
        n integer not null,
        primary key (common, term, channel_id, month)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists irc_term_pair_months;');
    this.addSql('drop table if exists irc_common_terms;');
  }
}
