import { Migration } from '@mikro-orm/migrations';

export class Migration20261121000200SpeechWorkers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table speech_workers (
        id serial primary key,
        name varchar(100) not null,
        secret_hash varchar(64) not null,
        created_at timestamptz not null default now(),
        last_seen_at timestamptz null,
        revoked_at timestamptz null,
        capabilities jsonb null,
        contract_version integer null,
        agent_version varchar(50) null,
        hostname varchar(255) null,
        constraint speech_workers_name_unique unique (name),
        constraint speech_workers_secret_unique unique (secret_hash)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists speech_workers;');
  }
}
