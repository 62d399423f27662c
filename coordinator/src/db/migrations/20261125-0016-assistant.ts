import { Migration } from '@mikro-orm/migrations';

/**
 * Organization assistant connector: tenant setups (credentials encrypted with ASSISTANT_SECRET_KEY),
 * their delegation to users, each user's delegated connection (MSAL token cache, encrypted), the
 * pending sign-ins (state hash → browser session, PKCE verifier encrypted; single use) and the
 * audit log, kept apart from the application log.
 */
export class Migration20261125001600Assistant extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table assistant_setups (
        id serial primary key,
        slug varchar(64) not null,
        display_name varchar(200) not null,
        client_id varchar(64) not null,
        credential_kind varchar(16) not null,
        credential_enc text not null,
        redirect_uri text not null,
        graph_url text not null,
        authority_host text not null,
        scopes text[] not null,
        time_zone varchar(64) not null default 'UTC',
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint assistant_setups_slug_unique unique (slug),
        constraint assistant_setups_credential_kind check (credential_kind in ('secret', 'certificate'))
      );`);
    this.addSql(`
      create table assistant_delegations (
        setup_id integer not null references assistant_setups (id) on delete cascade,
        user_id integer not null references users (id) on delete cascade,
        created_at timestamptz not null default now(),
        primary key (setup_id, user_id)
      );`);
    this.addSql(`
      create table assistant_connections (
        id serial primary key,
        user_id integer not null references users (id) on delete cascade,
        setup_id integer not null references assistant_setups (id) on delete cascade,
        status varchar(32) not null,
        home_account_id text,
        tenant_id varchar(64),
        username varchar(320),
        token_cache_enc text,
        last_validation jsonb,
        validated_at timestamptz,
        connected_at timestamptz,
        updated_at timestamptz not null default now(),
        constraint assistant_connections_unique unique (user_id, setup_id),
        constraint assistant_connections_status check (status in ('ready', 'reconnect_required', 'licence_missing', 'invalid'))
      );`);
    this.addSql(`
      create table assistant_auth_requests (
        state_hash char(64) primary key,
        session_hash char(64) not null,
        user_id integer not null references users (id) on delete cascade,
        setup_id integer not null references assistant_setups (id) on delete cascade,
        verifier_enc text not null,
        correlation_id uuid not null,
        expires_at timestamptz not null
      );`);
    this.addSql(`
      create table assistant_audit (
        id bigserial primary key,
        at timestamptz not null default now(),
        action varchar(32) not null,
        result varchar(32) not null,
        user_id integer,
        username varchar(100),
        setup_slug varchar(64),
        tenant_id varchar(64),
        correlation_id varchar(64),
        request_id varchar(64),
        error_code varchar(100),
        detail varchar(500)
      );`);
    this.addSql('create index assistant_audit_at on assistant_audit (at desc);');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists assistant_audit, assistant_auth_requests, assistant_connections, assistant_delegations, assistant_setups;');
  }
}
