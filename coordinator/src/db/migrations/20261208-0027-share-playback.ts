import { Migration } from '@mikro-orm/migrations';

/**
 * Whether the public share page of a job may play its retained media (the owner's setting on the
 * share, off by default): speech_jobs.share_playback. A new share starts with it off.
 */
export class Migration20261208002700SharePlayback extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table speech_jobs add column share_playback boolean not null default false;');
  }

  override async down(): Promise<void> {
    this.addSql('alter table speech_jobs drop column if exists share_playback;');
  }
}
