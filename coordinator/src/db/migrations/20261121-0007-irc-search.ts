import { Migration } from '@mikro-orm/migrations';

/**
 * Chat-log search: a stored search vector, nick/recipient indexes, netsplit burst leaders,
 * per-channel and per-nick counters kept at write time (so channel listings and nick profiles
 * never count millions of rows), and nick links (from NICK events and from admins).
 *
 * The search vector is PostgreSQL's `simple` configuration (no stemming, no stop words) over
 * nick, message, target and to_nick, plus every whitespace-delimited token that the default
 * parser would split (`f10__`, `rysiek|pl`, `foo_bar()`, `c++`, full URLs) as one lexeme, so
 * nicks, URLs and code can be found as written.
 */
export class Migration20261121000700IrcSearch extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create function irc_search_vector(nick text, msg text, target text, to_nick text) returns tsvector
      language sql immutable parallel safe as $fn$
        select to_tsvector('simple'::regconfig, concat_ws(' ', nick, msg, target, to_nick))
          || array_to_tsvector(array(
               select distinct w from (
                 select btrim(t, '.,:;!?()[]{}<>"''\`') as w
                 from regexp_split_to_table(lower(concat_ws(' ', nick, msg, target, to_nick)), '\\s+') as t
               ) s
               where w <> '' and w ~ '[^[:alnum:]]' and octet_length(w) <= 512))
      $fn$;`);
    this.addSql('drop index if exists irc_events_fts_idx;');
    this.addSql(`
      alter table irc_events
        add column search_vector tsvector generated always as (irc_search_vector(nick, message_text, target, to_nick)) stored,
        add column netsplit_leader boolean not null default false;`);
    this.addSql('create index irc_events_search_idx on irc_events using gin (search_vector);');
    // Ordered scans carry the columns every log query filters on (channel scope, netsplit rows), so
    // counting and deep offsets read the index alone.
    this.addSql('drop index if exists irc_events_channel_time_idx, irc_events_occurred_at_idx;');
    this.addSql('create index irc_events_channel_time_idx on irc_events (channel_id, occurred_at, id) include (event_type, netsplit_leader);');
    this.addSql('create index irc_events_occurred_at_idx on irc_events (occurred_at, id) include (channel_id, event_type, netsplit_leader);');
    // `nick` itself is included so the planner may answer nick counts from the index alone (it
    // does not consider index-only scans of an expression index otherwise).
    this.addSql(
      'create index irc_events_nick_idx on irc_events (lower(nick), occurred_at, id) include (nick, channel_id, event_type, netsplit_leader) where nick is not null;',
    );
    this.addSql('create index irc_events_target_idx on irc_events (lower(target)) where target is not null;');
    this.addSql('create index irc_events_to_nick_idx on irc_events (lower(to_nick)) where to_nick is not null;');
    this.addSql('create index irc_events_netsplit_idx on irc_events (netsplit_group) where netsplit_group is not null;');
    // Rows imported before this migration: the first row of each burst leads it.
    this.addSql(`
      update irc_events e set netsplit_leader = true
      from (select distinct on (netsplit_group) id from irc_events where netsplit_group is not null order by netsplit_group, occurred_at, id) f
      where e.id = f.id;`);

    this.addSql(`
      alter table irc_channels
        add column is_private boolean not null default false,
        add column first_at timestamp without time zone null,
        add column last_at timestamp without time zone null,
        add column event_count bigint not null default 0,
        add column netsplit_count bigint not null default 0,
        add column netsplit_leader_count bigint not null default 0;`);
    this.addSql(`update irc_channels set is_private = name !~ '^[#&+!]';`);
    this.addSql(`
      update irc_channels c set first_at = s.lo, last_at = s.hi, event_count = s.n, netsplit_count = s.ns, netsplit_leader_count = s.nl
      from (select channel_id, min(occurred_at) lo, max(occurred_at) hi, count(*) n,
                   count(*) filter (where event_type in ('NETSPLIT', 'NETMERGE')) ns,
                   count(*) filter (where event_type in ('NETSPLIT', 'NETMERGE') and netsplit_leader) nl
              from irc_events group by channel_id) s
      where c.id = s.channel_id;`);

    this.addSql(`
      create table irc_nicks (
        network_id integer not null references irc_networks (id) on delete cascade,
        nick_key text not null,
        nick text not null,
        first_at timestamp without time zone not null,
        last_at timestamp without time zone not null,
        message_count bigint not null default 0,
        event_count bigint not null default 0,
        primary key (network_id, nick_key)
      );`);
    this.addSql(`
      insert into irc_nicks (network_id, nick_key, nick, first_at, last_at, message_count, event_count)
      select c.network_id, lower(e.nick), min(e.nick), min(e.occurred_at), max(e.occurred_at),
             count(*) filter (where e.event_type in ('PRIVMSG', 'ACTION')), count(*)
      from irc_events e join irc_channels c on c.id = e.channel_id
      where e.nick is not null group by 1, 2;`);

    // Undirected links between two nick keys (nick_key < other_key). `blocked` records an admin's
    // removal, so a re-import does not bring a wrong log-derived link back.
    this.addSql(`
      create table irc_nick_links (
        id serial primary key,
        network_id integer not null references irc_networks (id) on delete cascade,
        nick_key text not null,
        other_key text not null,
        origin varchar(8) not null check (origin in ('log', 'admin')),
        blocked boolean not null default false,
        created_at timestamptz not null default now(),
        unique (network_id, nick_key, other_key),
        check (nick_key < other_key)
      );`);
    this.addSql('create index irc_nick_links_other_idx on irc_nick_links (network_id, other_key);');
    this.addSql(`
      insert into irc_nick_links (network_id, nick_key, other_key, origin)
      select distinct c.network_id, least(lower(e.nick), lower(e.to_nick)), greatest(lower(e.nick), lower(e.to_nick)), 'log'
      from irc_events e join irc_channels c on c.id = e.channel_id
      where e.event_type = 'NICK' and e.nick is not null and e.to_nick is not null and lower(e.nick) <> lower(e.to_nick)
        and lower(e.nick) !~ '^guest[0-9]+$' and lower(e.to_nick) !~ '^guest[0-9]+$'
      on conflict do nothing;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists irc_nick_links;');
    this.addSql('drop table if exists irc_nicks;');
    this.addSql(
      'alter table irc_channels drop column if exists is_private, drop column if exists first_at, drop column if exists last_at, drop column if exists event_count, drop column if exists netsplit_count, drop column if exists netsplit_leader_count;',
    );
    this.addSql(
      'drop index if exists irc_events_netsplit_idx, irc_events_to_nick_idx, irc_events_target_idx, irc_events_nick_idx, irc_events_search_idx, irc_events_channel_time_idx, irc_events_occurred_at_idx;',
    );
    this.addSql('create index irc_events_channel_time_idx on irc_events (channel_id, occurred_at, id);');
    this.addSql('create index irc_events_occurred_at_idx on irc_events (occurred_at, id);');
    this.addSql('alter table irc_events drop column if exists search_vector, drop column if exists netsplit_leader;');
    this.addSql('drop function if exists irc_search_vector(text, text, text, text);');
    this.addSql(`create index irc_events_fts_idx on irc_events using gin (to_tsvector('simple', coalesce(nick, '') || ' ' || coalesce(message_text, '')));`);
  }
}
