import { Migration } from '@mikro-orm/migrations';

/**
 * Counts of frequent words met together with the archive's most common words, so that a search
 * for a word less a common one (`q=there -i`) is counted without visiting a heap page for every
 * row that holds both (PostgreSQL reads each such page to check the row's visibility; for two
 * frequent words that is tens of thousands of pages).
 *
 * irc_frequent_terms: the archive's most frequent lexemes as IrcFrequentTerms.refresh last chose
 * them (after imports, on the maintenance queue, and with `irc:common-terms`); `common` marks the
 * most frequent few. A lexeme and all its pair counts come and go in one transaction.
 *
 * irc_term_pairs: per common lexeme, frequent lexeme and channel, how many rows (other than
 * NETSPLIT/NETMERGE) hold both. Kept at write time beside irc_term_months by the event store,
 * and taken down by deletes and reverts. Both start empty: the first refresh fills them.
 */
export class Migration20261125002300IrcTermPairs extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table irc_frequent_terms (
        term text primary key,
        common boolean not null default false
      );`);
    this.addSql(`
      create table irc_term_pairs (
        common text not null,
        term text not null,
        channel_id integer not null references irc_channels (id) on delete cascade,
        n integer not null,
        primary key (common, term, channel_id)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists irc_term_pairs;');
    this.addSql('drop table if exists irc_frequent_terms;');
  }
}
