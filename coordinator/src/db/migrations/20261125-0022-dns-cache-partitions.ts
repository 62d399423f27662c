import { Migration } from '@mikro-orm/migrations';

/**
 * The DNS record cache becomes a table partitioned by zone (LIST on zone_id): one partition per
 * cached zone, named dns_record_cache_z<zone id>. A full refresh then loads a new table with
 * COPY FREEZE and swaps it in for the zone's old partition inside the same transaction
 * (coordinator/src/dns/zone-cache.ts). Three B-trees maintained in random order during the COPY, a
 * foreign-key check per row and deleting the old rows were most of a refresh's time.
 *
 * One index serves everything: (sort_key, type_rank, type, rdata, id) gives cache order, keyset
 * paging and name/type lookups (sort_key is the name's labels reversed), and it includes the other
 * columns a page reads, so a page is an index-only scan (the name is its sort key reversed back).
 * zone_id leads no index: a query names the zone and reads that partition only. There is no
 * foreign key to dns_zones (a partition attached with one would be checked row by row); removing
 * a zone drops its partition (ZoneRegistry.remove).
 *
 * The partitions are unlogged: the cache is derived from the master, so its rows need no WAL.
 * PostgreSQL empties unlogged tables after a crash; a cache state whose partition lost its rows
 * counts as no cache (zone-registry.ts, cacheEmptied) and the next read transfers the zone again.
 */
export class Migration20261125002200DnsCachePartitions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table dns_record_cache rename to dns_record_cache_unpartitioned;`);
    this.addSql(`alter index dns_record_cache_order rename to dns_record_cache_unpartitioned_order;`);
    this.addSql(`alter index dns_record_cache_name_type rename to dns_record_cache_unpartitioned_name_type;`);
    this.addSql(`alter sequence dns_record_cache_id_seq owned by none;`);
    this.addSql(`
      create table dns_record_cache (
        id bigint not null default nextval('dns_record_cache_id_seq'),
        zone_id integer not null,
        sort_key text collate "C" not null,
        type_rank smallint not null,
        name text not null,
        type varchar(16) not null,
        class varchar(8) not null default 'IN',
        ttl integer not null,
        rdata text collate "C" not null
      ) partition by list (zone_id);`);
    this.addSql(`alter sequence dns_record_cache_id_seq owned by dns_record_cache.id;`);
    this.addSql(`create index dns_record_cache_order on dns_record_cache (sort_key, type_rank, type, rdata, id) include (zone_id, ttl, class);`);
    this.addSql(`
      do $$
      declare z integer;
      begin
        for z in select distinct zone_id from dns_record_cache_unpartitioned loop
          execute format('create unlogged table %I partition of dns_record_cache for values in (%s)', 'dns_record_cache_z' || z, z);
        end loop;
      end $$;`);
    this.addSql(`
      insert into dns_record_cache (id, zone_id, sort_key, type_rank, name, type, class, ttl, rdata)
      select id, zone_id, sort_key, type_rank, name, type, class, ttl, rdata from dns_record_cache_unpartitioned;`);
    this.addSql(`drop table dns_record_cache_unpartitioned;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table dns_record_cache rename to dns_record_cache_partitioned;`);
    this.addSql(`alter index dns_record_cache_order rename to dns_record_cache_partitioned_order;`);
    this.addSql(`alter sequence dns_record_cache_id_seq owned by none;`);
    this.addSql(`
      create table dns_record_cache (
        id bigint primary key default nextval('dns_record_cache_id_seq'),
        zone_id integer not null references dns_zones (id) on delete cascade,
        sort_key text collate "C" not null,
        type_rank smallint not null,
        name text not null,
        type varchar(16) not null,
        class varchar(8) not null default 'IN',
        ttl integer not null,
        rdata text collate "C" not null
      );`);
    this.addSql(`alter sequence dns_record_cache_id_seq owned by dns_record_cache.id;`);
    // Rows loaded by a refresh carry ids -1, -2, … per zone (zone-cache.ts, CacheRowWriter): they
    // take new ids from the sequence here; ids from the sequence stay.
    this.addSql(`
      insert into dns_record_cache (id, zone_id, sort_key, type_rank, name, type, class, ttl, rdata)
      select case when p.id > 0 then p.id else nextval('dns_record_cache_id_seq') end, p.zone_id, p.sort_key, p.type_rank, p.name, p.type, p.class, p.ttl, p.rdata
        from dns_record_cache_partitioned p join dns_zones z on z.id = p.zone_id;`);
    this.addSql(`drop table dns_record_cache_partitioned;`);
    // Partitions a refresh replaced and had not dropped yet (detached, so not dropped with the parent).
    this.addSql(`
      do $$ declare t text; begin
        for t in select relname from pg_class where relkind = 'r' and relname ~ '^dns_record_cache_z[0-9]+_replaced$' loop
          execute format('drop table %I', t);
        end loop;
      end $$;`);
    this.addSql(`create index dns_record_cache_order on dns_record_cache (zone_id, sort_key, type_rank, type, rdata, id);`);
    this.addSql(`create index dns_record_cache_name_type on dns_record_cache (zone_id, name, type);`);
  }
}
