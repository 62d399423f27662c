import { Migration } from '@mikro-orm/migrations';

/**
 * External DNS provider zones. A provider zone is a `dns_zones` row without zone file and TSIG key
 * (its cache rows hang off that row like any zone's) plus one `dns_provider_zones` mapping row:
 * the provider key, the zone id at the provider and a reference to the API token (`env:NAME`,
 * `file:/path` or `file:/path#KEY`), never the token itself.
 */
export class Migration20261125001900DnsProviders extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table dns_zones alter column file_path drop not null, alter column key_path drop not null;`);
    this.addSql(`
      create table dns_provider_zones (
        zone_id integer primary key references dns_zones (id) on delete cascade,
        provider varchar(32) not null,
        provider_zone_id varchar(64) not null,
        token_ref text not null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists dns_provider_zones;');
    this.addSql(`delete from dns_zones where file_path is null or key_path is null;`);
    this.addSql(`alter table dns_zones alter column file_path set not null, alter column key_path set not null;`);
  }
}
