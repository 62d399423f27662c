import { Migration } from '@mikro-orm/migrations';

/**
 * app_settings: settings administrators change at run time (key → JSON value, who and when).
 * The first one is `speech.local_models`, the local runner's model allowlist; while it has no row
 * the SPEECH_LOCAL_MODELS environment variable (default `small`) is the value (it only seeds it).
 */
export class Migration20261124001200AppSettings extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table app_settings (
      key text primary key,
      value jsonb not null,
      updated_at timestamptz not null default now(),
      updated_by text null
    );`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table app_settings;`);
  }
}
