import { Migration } from '@mikro-orm/migrations';

/**
 * Rows per channel and UTC day, kept at write time beside the channel counters (the event store
 * adds to them in its insert statement; deletes and batch reverts recount the days they touched):
 * the reader's calendar reads a channel's year from here instead of counting its rows.
 * `events` counts every row, `messages` the PRIVMSG, ACTION and NOTICE rows.
 */
export class Migration20261125002100IrcChannelDays extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table irc_channel_days (
        channel_id integer not null references irc_channels (id) on delete cascade,
        day date not null,
        events bigint not null default 0,
        messages bigint not null default 0,
        primary key (channel_id, day)
      );`);
    this.addSql(`
      insert into irc_channel_days (channel_id, day, events, messages)
      select channel_id, occurred_at::date, count(*), count(*) filter (where event_type in ('PRIVMSG', 'ACTION', 'NOTICE'))
        from irc_events group by 1, 2;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists irc_channel_days;');
  }
}
