import { Migration } from '@mikro-orm/migrations';

export class Migration20261121000100Accounts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table users (
        id serial primary key,
        username varchar(100) not null,
        email varchar(320) null,
        password_hash text not null,
        is_admin boolean not null default false,
        permissions text[] not null default '{}',
        disabled_at timestamptz null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint users_permissions_known check (permissions <@ array['speech.use','speech.manage','speech.api','provider_openai','ai.assistant','spam.analyze']::text[])
      );`);
    this.addSql(`create unique index users_username_lower_unique on users (lower(username));`);

    this.addSql(`
      create table dns_zone_permissions (
        id serial primary key,
        user_id integer not null references users (id) on delete cascade,
        zone varchar(253) not null,
        can_read boolean not null default true,
        can_write boolean not null default false,
        created_at timestamptz not null default now(),
        constraint dns_zone_permissions_user_zone_unique unique (user_id, zone)
      );`);

    this.addSql(`
      create table personal_access_tokens (
        id serial primary key,
        user_id integer not null references users (id) on delete cascade,
        name varchar(100) not null,
        scopes text[] not null default '{}',
        token_hash varchar(64) not null,
        prefix varchar(32) not null,
        created_at timestamptz not null default now(),
        expires_at timestamptz null,
        last_used_at timestamptz null,
        revoked_at timestamptz null,
        constraint personal_access_tokens_hash_unique unique (token_hash)
      );`);
    this.addSql(`create index personal_access_tokens_user_idx on personal_access_tokens (user_id);`);

    this.addSql(`
      create table dns_api_keys (
        id serial primary key,
        user_id integer null references users (id) on delete cascade,
        name varchar(100) not null,
        key_hash varchar(64) not null,
        prefix varchar(32) not null,
        created_at timestamptz not null default now(),
        expires_at timestamptz null,
        last_used_at timestamptz null,
        revoked_at timestamptz null,
        constraint dns_api_keys_hash_unique unique (key_hash)
      );`);

    this.addSql(`
      create table dns_ip_whitelist (
        id serial primary key,
        cidr varchar(64) not null,
        note varchar(200) null,
        created_at timestamptz not null default now(),
        constraint dns_ip_whitelist_cidr_unique unique (cidr)
      );`);

    this.addSql(`
      create table web_sessions (
        id_hash varchar(64) primary key,
        data jsonb not null,
        user_id integer null references users (id) on delete cascade,
        expires_at timestamptz not null,
        updated_at timestamptz not null default now()
      );`);
    this.addSql(`create index web_sessions_expires_idx on web_sessions (expires_at);`);
    this.addSql(`create index web_sessions_user_idx on web_sessions (user_id);`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists web_sessions, dns_ip_whitelist, dns_api_keys, personal_access_tokens, dns_zone_permissions, users cascade;');
  }
}
