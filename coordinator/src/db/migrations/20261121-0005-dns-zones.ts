import { Migration } from '@mikro-orm/migrations';

/** DNS zone registry (managed with `dns:zone:*` CLI commands) and the row-based zone cache. */
export class Migration20261121000500DnsZones extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table dns_zones (
        id serial primary key,
        zone varchar(253) not null unique,
        server varchar(255) not null default '127.0.0.1',
        port integer not null default 53 check (port between 1 and 65535),
        file_path text not null,
        key_path text not null,
        cache_ttl_seconds integer null check (cache_ttl_seconds is null or cache_ttl_seconds >= 0),
        invalidate_enabled boolean not null default true,
        invalidate_interval_seconds integer not null default 0 check (invalidate_interval_seconds >= 0),
        last_invalidated_at timestamptz null,
        protect_from_clear boolean not null default false,
        created_at timestamptz not null default now()
      );`);
    this.addSql(`
      create table dns_zone_cache_state (
        zone_id integer primary key references dns_zones (id) on delete cascade,
        serial bigint not null,
        record_count integer not null default 0,
        cached_at timestamptz not null default now()
      );`);
    // One row per record. Ordering key: owner labels reversed (canonical DNS order, apex first), then
    // SOA, NS, other types, rdata, id: unique and deterministic, so pages are stable and keyset-friendly.
    this.addSql(`
      create table dns_record_cache (
        id bigserial primary key,
        zone_id integer not null references dns_zones (id) on delete cascade,
        sort_key text collate "C" not null,
        type_rank smallint not null,
        name text not null,
        type varchar(16) not null,
        class varchar(8) not null default 'IN',
        ttl integer not null,
        rdata text collate "C" not null
      );`);
    this.addSql(`create index dns_record_cache_order on dns_record_cache (zone_id, sort_key, type_rank, type, rdata, id);`);
    this.addSql(`create index dns_record_cache_name_type on dns_record_cache (zone_id, name, type);`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists dns_record_cache;`);
    this.addSql(`drop table if exists dns_zone_cache_state;`);
    this.addSql(`drop table if exists dns_zones;`);
  }
}
