import { Migration } from '@mikro-orm/migrations';

/**
 * users.token_version: every JWT carries the version of its user at issue time (claim `ver`) and
 * is accepted only while it still matches. A password change and disabling the account bump it,
 * so JWTs issued before stop working at once instead of at their expiry.
 */
export class Migration20261124000900UserTokenVersion extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table users add column token_version integer not null default 0;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table users drop column token_version;`);
  }
}
