import { Migration } from '@mikro-orm/migrations';

/**
 * Chat-log archive: networks (per data source), channels and events. Events are idempotent per
 * channel through `line_hash` (sha256 of channel, date, line number and raw line). `occurred_at` is
 * UTC (the log's local time converted at import). The trigram index needs pg_trgm; it is created
 * only where the server offers that extension.
 */
export class Migration20261121000600Irc extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table irc_networks (
        id serial primary key,
        name varchar(255) not null,
        source varchar(16) not null default 'production' check (source in ('production', 'sandbox')),
        created_at timestamptz not null default now(),
        unique (source, name)
      );`);
    this.addSql(`
      create table irc_channels (
        id serial primary key,
        network_id integer not null references irc_networks (id) on delete cascade,
        name varchar(255) not null,
        created_at timestamptz not null default now(),
        unique (network_id, name)
      );`);
    this.addSql(`
      create table irc_events (
        id bigserial primary key,
        channel_id integer not null references irc_channels (id) on delete cascade,
        event_type varchar(16) not null,
        occurred_at timestamp without time zone not null,
        nick text null,
        message_text text null,
        target text null,
        to_nick text null,
        netsplit_group bigint null,
        line_hash bytea not null,
        unique (channel_id, line_hash)
      );`);
    this.addSql('create index irc_events_channel_time_idx on irc_events (channel_id, occurred_at, id);');
    this.addSql('create index irc_events_occurred_at_idx on irc_events (occurred_at, id);');
    this.addSql(`create index irc_events_fts_idx on irc_events using gin (to_tsvector('simple', coalesce(nick, '') || ' ' || coalesce(message_text, '')));`);
    this.addSql(`
      do $$
      begin
        if exists (select 1 from pg_available_extensions where name = 'pg_trgm') then
          create extension if not exists pg_trgm;
          execute 'create index irc_events_message_trgm_idx on irc_events using gin (message_text gin_trgm_ops)';
        end if;
      end $$;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists irc_events;');
    this.addSql('drop table if exists irc_channels;');
    this.addSql('drop table if exists irc_networks;');
  }
}
