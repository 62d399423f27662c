import { Migration } from '@mikro-orm/migrations';

/**
 * Chat-log archive corrections and search parts.
 *
 * irc_import_batches: one row per `irc:import` run (network, paths, options, counts); every row an
 * import adds carries its batch in `irc_events.import_batch_id`, so a run with a wrong time zone,
 * parser or day can be listed (`irc:imports`) and reverted (`irc:import:revert`). Rows of the live
 * logger and rows imported before this migration have no batch. The column has no foreign key: a
 * key check per inserted row would slow imports, and a batch row is never deleted (a revert marks
 * it), so the id never dangles.
 *
 * irc_nicks.last_message_at: the last PRIVMSG/ACTION of the nick, next to last_at (last seen in
 * any row: joins, quits, nick changes), so a profile tells "last spoke" from "last seen".
 *
 * The search vector also stores the alphanumeric parts of every token (`this.flowManager.start()`
 * → `flowmanager`; `https://github.com/x` → `github`) and each non-ASCII symbol on its own (a run
 * `😀😀😀` → `😀`), beside the whole tokens it stored before. The stored column is recomputed.
 *
 * irc_term_months: per search-vector lexeme, channel and month, how many rows (other than
 * NETSPLIT/NETMERGE) hold it and on which days of the month (bit d-1 of `days` for day d, UTC).
 * Kept at write time by the event store (and repaired by reverts and deletes), it answers the
 * `total` and `aggregate=dates` of a one-word search without visiting a heap page per match, and
 * tells the search which months hold the page it is asked for.
 */
export class Migration20261125001400IrcImportBatches extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table irc_import_batches (
        id serial primary key,
        network_id integer not null references irc_networks (id) on delete cascade,
        paths jsonb not null default '[]',
        options jsonb not null default '{}',
        started_at timestamptz not null default now(),
        finished_at timestamptz null,
        reverted_at timestamptz null,
        files integer not null default 0,
        lines bigint not null default 0,
        inserted bigint not null default 0,
        unparsed bigint not null default 0
      );`);
    this.addSql('alter table irc_events add column import_batch_id integer null;');
    this.addSql('create index irc_events_import_batch_idx on irc_events (import_batch_id) where import_batch_id is not null;');

    this.addSql('alter table irc_nicks add column last_message_at timestamp without time zone null;');
    this.addSql(`
      update irc_nicks k set last_message_at = s.m
      from (select c.network_id, lower(e.nick) as nick_key, max(e.occurred_at) as m
              from irc_events e join irc_channels c on c.id = e.channel_id
             where e.nick is not null and e.event_type in ('PRIVMSG', 'ACTION') group by 1, 2) s
      where k.network_id = s.network_id and k.nick_key = s.nick_key;`);

    // The generated column is dropped (with its index) before the function changes, then added
    // back so every row is computed with the new function.
    this.addSql('alter table irc_events drop column search_vector;');
    this.addSql(`
      create or replace function irc_search_vector(nick text, msg text, target text, to_nick text) returns tsvector
      language sql immutable parallel safe as $fn$
        select to_tsvector('simple'::regconfig, concat_ws(' ', nick, msg, target, to_nick))
          || array_to_tsvector(array(
               select distinct x from (
                 select btrim(t, '.,:;!?()[]{}<>"''\`') as w
                 from regexp_split_to_table(lower(concat_ws(' ', nick, msg, target, to_nick)), '\\s+') as t
               ) s
               -- Tokens with punctuation or symbols only (plain words are in to_tsvector already):
               -- the whole token, its alphanumeric parts, and each non-ASCII symbol in it.
               cross join lateral (
                 select s.w
                 union all
                 select p from regexp_split_to_table(s.w, '[^[:alnum:]]+') as p
                 union all
                 select (regexp_matches(s.w, '[^\\x01-\\x7f\\u00a0-\\u00bf\\u2000-\\u206f\\u3000-\\u303f\\ufe0f[:alnum:][:space:]]', 'g'))[1]
               ) as parts (x)
               where s.w ~ '[^[:alnum:]]' and x <> '' and octet_length(x) <= 512))
      $fn$;`);
    this.addSql(
      'alter table irc_events add column search_vector tsvector generated always as (irc_search_vector(nick, message_text, target, to_nick)) stored;',
    );
    this.addSql('create index irc_events_search_idx on irc_events using gin (search_vector);');

    this.addSql(`
      create table irc_term_months (
        term text not null,
        channel_id integer not null references irc_channels (id) on delete cascade,
        month date not null,
        n integer not null,
        days integer not null,
        primary key (term, channel_id, month)
      );`);
    this.addSql(`
      insert into irc_term_months (term, channel_id, month, n, days)
      select t.lexeme, e.channel_id, date_trunc('month', e.occurred_at)::date, count(*), bit_or(1 << (extract(day from e.occurred_at)::int - 1))
        from irc_events e cross join lateral unnest(e.search_vector) t
       where e.event_type not in ('NETSPLIT', 'NETMERGE')
       group by 1, 2, 3;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists irc_term_months;');
    this.addSql('drop index if exists irc_events_import_batch_idx;');
    this.addSql('alter table irc_events drop column if exists import_batch_id;');
    this.addSql('drop table if exists irc_import_batches;');
    this.addSql('alter table irc_nicks drop column if exists last_message_at;');
  }
}
