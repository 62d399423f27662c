import { Migration } from '@mikro-orm/migrations';

/**
 * Keyset paging of the DNS record cache: `generation` changes (from one sequence, so a cleared and
 * refilled cache never repeats an earlier value) whenever a zone's cached rows change (a full replace
 * or a write's sync). A coordinator keeps the sort keys of every 1,000th row of a zone for the
 * generation it read them at and starts deep pages from the nearest one instead of an OFFSET
 * that walks the whole index (coordinator/src/dns/zone-cache.ts). Every writer of
 * dns_record_cache must move the generation.
 */
export class Migration20261125002000DnsCachePaging extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create sequence if not exists dns_cache_generation_seq;`);
    this.addSql(`alter table dns_zone_cache_state add column generation bigint not null default nextval('dns_cache_generation_seq');`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table dns_zone_cache_state drop column if exists generation;`);
    this.addSql(`drop sequence if exists dns_cache_generation_seq;`);
  }
}
