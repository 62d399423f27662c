import { Migration } from '@mikro-orm/migrations';

/** Terminal callbacks, shares and the token that submitted an API job (its callback signing secret). */
export class Migration20261121000400SpeechIntegrations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table speech_jobs
        add column api_token_id integer null references personal_access_tokens (id) on delete set null,
        add column callback_url text null,
        add column callback_status varchar(16) null,
        add column callback_http_status integer null,
        add column callback_last_attempt_at timestamptz null,
        add column callback_delivered_at timestamptz null,
        add column callback_error text null,
        add column callback_attempts integer not null default 0,
        add column callback_cycle integer not null default 0,
        add column share_token varchar(64) null,
        add column share_created_at timestamptz null,
        add column share_disabled_at timestamptz null,
        add column report_sent_at timestamptz null,
        add constraint speech_jobs_callback_status_known check (callback_status is null or callback_status in ('pending','retrying','delivered','failed')),
        add constraint speech_jobs_share_token_unique unique (share_token);`);
    // Per-token secret that signs terminal callbacks (HMAC-SHA256); shown when the token is created.
    this.addSql(`alter table personal_access_tokens add column callback_secret varchar(64) null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table personal_access_tokens drop column if exists callback_secret;`);
    this.addSql(`alter table speech_jobs drop column if exists api_token_id, drop column if exists callback_url, drop column if exists callback_status,
      drop column if exists callback_http_status, drop column if exists callback_last_attempt_at, drop column if exists callback_delivered_at,
      drop column if exists callback_error, drop column if exists callback_attempts, drop column if exists callback_cycle,
      drop column if exists share_token, drop column if exists share_created_at, drop column if exists share_disabled_at,
      drop column if exists report_sent_at;`);
  }
}
