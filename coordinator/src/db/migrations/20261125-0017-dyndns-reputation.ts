import { Migration } from '@mikro-orm/migrations';

/**
 * Dynamic DNS (`/api/dyndns`): owner-bound tokens (only their SHA-256 is stored) with
 * the host names each may update, and per host the abuse state (identical updates in a row).
 * Reputation (`/api/reputation`): community reports (one current report per reporter and target)
 * and the audit trail of every report action.
 */
export class Migration20261125001700DyndnsReputation extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table dyndns_tokens (
        id serial primary key,
        owner_id integer not null references users (id) on delete cascade,
        name varchar(100) not null,
        token_hash char(64) not null unique,
        prefix varchar(32) not null,
        created_at timestamptz not null default now(),
        last_used_at timestamptz null,
        revoked_at timestamptz null
      );`);
    this.addSql('create index dyndns_tokens_owner on dyndns_tokens (owner_id);');
    this.addSql(`
      create table dyndns_hosts (
        token_id integer not null references dyndns_tokens (id) on delete cascade,
        hostname varchar(253) not null,
        zone varchar(253) not null,
        last_ipv4 varchar(15) null,
        last_ipv6 varchar(45) null,
        last_update_at timestamptz null,
        nochg_streak integer not null default 0,
        blocked_until timestamptz null,
        primary key (token_id, hostname)
      );`);
    this.addSql(`
      create table reputation_reports (
        id serial primary key,
        reporter_id integer not null references users (id) on delete cascade,
        target_type varchar(16) not null,
        target varchar(2048) not null,
        category varchar(32) not null,
        comment varchar(1000) not null default '',
        weight double precision not null,
        created_at timestamptz not null,
        constraint reputation_reports_one_per_reporter unique (target_type, target, reporter_id)
      );`);
    this.addSql('create index reputation_reports_target on reputation_reports (target_type, target);');
    this.addSql(`
      create table reputation_audit (
        id bigserial primary key,
        at timestamptz not null,
        actor_id integer null references users (id) on delete set null,
        action varchar(32) not null,
        target_type varchar(16) not null,
        target varchar(2048) not null,
        detail jsonb not null default '{}'::jsonb,
        client_ip varchar(45) null
      );`);
    this.addSql('create index reputation_audit_target on reputation_audit (target_type, target);');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists reputation_audit;');
    this.addSql('drop table if exists reputation_reports;');
    this.addSql('drop table if exists dyndns_hosts;');
    this.addSql('drop table if exists dyndns_tokens;');
  }
}
