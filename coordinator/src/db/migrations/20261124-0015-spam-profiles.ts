import { Migration } from '@mikro-orm/migrations';

/**
 * Spam scoring profiles: a user's own threshold, sender allow and deny lists and extra rules
 * (`[{name, pattern, field, score, description}]`, regular expressions over subject, from or body),
 * selected by `profile_id` on POST /api/spam/analyze.
 */
export class Migration20261124001500SpamProfiles extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table spam_profiles (
        id serial primary key,
        owner_id integer not null references users (id) on delete cascade,
        name varchar(100) not null,
        threshold double precision not null default 5,
        allow_senders text[] not null default '{}',
        deny_senders text[] not null default '{}',
        extra_rules jsonb not null default '[]'::jsonb,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint spam_profiles_name_unique unique (owner_id, name)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists spam_profiles;');
  }
}
