import { Migration } from '@mikro-orm/migrations';

/**
 * Chat text is never read as HTML by the full-text parser. PostgreSQL's default parser takes
 * `<marquee>` for a tag (not indexed) and everything after `<style>` or `<script>` for markup, so
 * those words were never found. irc_fts_text() turns `<` and `>` into spaces; the search vector
 * and the queries of the search (plainto_tsquery, phraseto_tsquery, to_tsvector of a term) all
 * read text through it, so index and query split words the same way. The tokens with punctuation
 * (the second part of the vector) are still taken from the text as written.
 *
 * Existing rows: the stored column is recomputed (dropped and added back). irc_term_months moves
 * by the lexemes each changed row gained or lost; the frequent-term pair counts are emptied when
 * any row changed, and the next refresh (after imports, on the maintenance queue, `irc:common-terms`)
 * counts them again, as after migration 0023.
 */
const VECTOR = (text: string) => `
      create or replace function irc_search_vector(nick text, msg text, target text, to_nick text) returns tsvector
      language sql immutable parallel safe as $fn$
        select to_tsvector('simple'::regconfig, ${text})
          || array_to_tsvector(array(
               select distinct x from (
                 select btrim(t, '.,:;!?()[]{}<>"''\`') as w
                 from regexp_split_to_table(lower(concat_ws(' ', nick, msg, target, to_nick)), '\\s+') as t
               ) s
               cross join lateral (
                 select s.w
                 union all
                 select p from regexp_split_to_table(s.w, '[^[:alnum:]]+') as p
                 union all
                 select (regexp_matches(s.w, '[^\\x01-\\x7f\\u00a0-\\u00bf\\u2000-\\u206f\\u3000-\\u303f\\ufe0f[:alnum:][:space:]]', 'g'))[1]
               ) as parts (x)
               where s.w ~ '[^[:alnum:]]' and x <> '' and octet_length(x) <= 512))
      $fn$;`;

export class Migration20261127002500IrcSearchText extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create or replace function irc_fts_text(t text) returns text
      language sql immutable parallel safe as $fn$ select translate(t, '<>', '  ') $fn$;`);
    await this.recompute(VECTOR(`irc_fts_text(concat_ws(' ', nick, msg, target, to_nick))`));
  }

  override async down(): Promise<void> {
    await this.recompute(VECTOR(`concat_ws(' ', nick, msg, target, to_nick)`));
    this.addSql('drop function if exists irc_fts_text(text);');
  }

  /** The vector function replaced, the stored column recomputed, the per-term counts of the rows it changed moved. */
  private async recompute(fn: string): Promise<void> {
    // Only rows with `<` or `>` can change.
    this.addSql(`
      create temporary table irc_vector_before as
        select id, channel_id, occurred_at, search_vector from irc_events
         where event_type not in ('NETSPLIT', 'NETMERGE') and concat_ws(' ', nick, message_text, target, to_nick) ~ '[<>]';`);
    this.addSql('alter table irc_events drop column search_vector;');
    this.addSql(fn);
    this.addSql(
      'alter table irc_events add column search_vector tsvector generated always as (irc_search_vector(nick, message_text, target, to_nick)) stored;',
    );
    this.addSql('create index irc_events_search_idx on irc_events using gin (search_vector);');
    this.addSql(`
      create temporary table irc_vector_change as
        select b.channel_id, date_trunc('month', b.occurred_at)::date as month, d.lexeme, d.delta,
               1 << (extract(day from b.occurred_at)::int - 1) as day_bit
          from irc_vector_before b join irc_events e on e.id = b.id
         cross join lateral (
           select x as lexeme, 1 as delta from unnest(tsvector_to_array(e.search_vector)) x
            where not (tsvector_to_array(b.search_vector) @> array[x])
           union all
           select x, -1 from unnest(tsvector_to_array(b.search_vector)) x
            where not (tsvector_to_array(e.search_vector) @> array[x])
         ) d (lexeme, delta);`);
    this.addSql(`
      insert into irc_term_months as t (term, channel_id, month, n, days)
      select lexeme, channel_id, month, sum(delta), bit_or(day_bit) filter (where delta > 0)
        from irc_vector_change group by 1, 2, 3 having sum(delta) > 0
      on conflict (term, channel_id, month) do update set n = t.n + excluded.n, days = t.days | coalesce(excluded.days, 0);`);
    this.addSql(`
      update irc_term_months t set n = t.n + c.n
        from (select lexeme, channel_id, month, sum(delta) as n from irc_vector_change group by 1, 2, 3 having sum(delta) < 0) c
       where t.term = c.lexeme and t.channel_id = c.channel_id and t.month = c.month;`);
    this.addSql('delete from irc_term_months where n <= 0;');
    this.addSql(`
      do $do$ begin
        if exists (select 1 from irc_vector_change) then
          delete from irc_term_pairs;
          delete from irc_frequent_terms;
        end if;
      end $do$;`);
    this.addSql('drop table irc_vector_change, irc_vector_before;');
  }
}
