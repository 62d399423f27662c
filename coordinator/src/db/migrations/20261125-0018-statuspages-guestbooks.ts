import { Migration } from '@mikro-orm/migrations';

/**
 * Status pages and guestbooks (platform endpoints).
 *
 * Status pages belong to one user (the owner; administrators see all). Components and their groups
 * share one table (a group is a component row with `is_group`), as Statuspage's summary.json lists
 * them. Incidents and scheduled maintenances share one table (`kind`), again as Statuspage models
 * them; their updates are drafts until `published_at` is set, and only published updates (and
 * incidents with at least one) are public. `internal_notes` and the audit table never leave the
 * management API.
 *
 * Guestbook entries keep the spam analysis that decided whether they were published or held.
 */
export class Migration20261125001800StatuspagesGuestbooks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table status_pages (
        id serial primary key,
        owner_id integer not null references users (id) on delete cascade,
        slug varchar(64) not null unique,
        name varchar(200) not null,
        time_zone varchar(64) not null default 'Etc/UTC',
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );
      create index status_pages_owner_idx on status_pages (owner_id);

      create table status_components (
        id serial primary key,
        page_id integer not null references status_pages (id) on delete cascade,
        group_id integer references status_components (id) on delete set null,
        is_group boolean not null default false,
        name varchar(200) not null,
        description text,
        status varchar(32) not null default 'operational'
          check (status in ('operational', 'degraded_performance', 'partial_outage', 'major_outage', 'under_maintenance')),
        position integer not null default 0,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );
      create index status_components_page_idx on status_components (page_id);

      create table status_incidents (
        id serial primary key,
        page_id integer not null references status_pages (id) on delete cascade,
        kind varchar(16) not null check (kind in ('incident', 'maintenance')),
        name varchar(200) not null,
        status varchar(16) not null
          check (status in ('investigating', 'identified', 'monitoring', 'resolved', 'scheduled', 'in_progress', 'verifying', 'completed')),
        impact varchar(16) not null default 'none' check (impact in ('none', 'minor', 'major', 'critical', 'maintenance')),
        component_ids integer[] not null default '{}',
        internal_notes text not null default '',
        scheduled_for timestamptz,
        scheduled_until timestamptz,
        resolved_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );
      create index status_incidents_page_idx on status_incidents (page_id);

      create table status_incident_updates (
        id serial primary key,
        incident_id integer not null references status_incidents (id) on delete cascade,
        status varchar(16) not null,
        body text not null,
        published_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );
      create index status_incident_updates_incident_idx on status_incident_updates (incident_id);

      create table status_audit (
        id bigserial primary key,
        page_id integer references status_pages (id) on delete set null,
        page_slug varchar(64) not null,
        actor_id integer references users (id) on delete set null,
        actor varchar(100) not null,
        action varchar(64) not null,
        target varchar(100),
        detail jsonb not null default '{}'::jsonb,
        at timestamptz not null default now()
      );
      create index status_audit_page_idx on status_audit (page_id, at desc);

      create table guestbooks (
        id serial primary key,
        owner_id integer not null references users (id) on delete cascade,
        slug varchar(64) not null unique,
        title varchar(200) not null,
        description text not null default '',
        hold_all boolean not null default false,
        spam_profile_id integer references spam_profiles (id) on delete set null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );
      create index guestbooks_owner_idx on guestbooks (owner_id);

      create table guestbook_entries (
        id serial primary key,
        guestbook_id integer not null references guestbooks (id) on delete cascade,
        name varchar(100) not null,
        message text not null,
        status varchar(16) not null check (status in ('pending', 'published', 'rejected')),
        spam_status varchar(16) not null check (spam_status in ('ok', 'degraded', 'unavailable')),
        spam_score double precision,
        spam_threshold double precision,
        spam_verdict varchar(8) check (spam_verdict in ('spam', 'ham')),
        spam_rules jsonb not null default '[]'::jsonb,
        client_ip varchar(64),
        moderated_at timestamptz,
        moderated_by integer references users (id) on delete set null,
        created_at timestamptz not null default now()
      );
      create index guestbook_entries_book_idx on guestbook_entries (guestbook_id, status, created_at desc);`);
  }

  override async down(): Promise<void> {
    this.addSql(
      'drop table if exists guestbook_entries; drop table if exists guestbooks; drop table if exists status_audit; drop table if exists status_incident_updates; drop table if exists status_incidents; drop table if exists status_components; drop table if exists status_pages;',
    );
  }
}
