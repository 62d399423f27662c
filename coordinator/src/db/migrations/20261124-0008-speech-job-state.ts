import { Migration } from '@mikro-orm/migrations';

/**
 * Speech job state owned by one repository (speech/jobs/job-repository.ts):
 * - claim eligibility precomputed on the job row (owner_is_admin, worker_fetchable) and one partial
 *   index in claim order, so a claim is one indexed statement under skip locked;
 * - leases remember the worker session that took them, so a new Hello releases the leases its
 *   earlier session held and no longer holds;
 * - a transactional outbox of terminal notifications (one row per job and notification cycle),
 *   written in the transaction that ends the job and drained into the callback and report queues;
 * - every job starts in notification cycle 1 (callbacks and reports share the cycle).
 */
export class Migration20261124000800SpeechJobState extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table speech_jobs
        add column owner_is_admin boolean not null default false,
        add column worker_fetchable boolean not null default false,
        add column outcome varchar(16) null;`);
    this.addSql(`update speech_jobs j set owner_is_admin = u.is_admin from users u where u.id = j.owner_id;`);
    // Earlier URL jobs keep worker_fetchable = false: the coordinator stages them, which is always safe.
    this.addSql(`update speech_jobs set outcome = case when stage_label = 'Cancelled' then 'cancelled' else 'failed' end where status = 'failed';`);
    this.addSql(`update speech_jobs set outcome = 'completed' where status = 'completed';`);
    this.addSql(`update speech_jobs set callback_cycle = 1 where callback_cycle = 0;`);
    this.addSql(`alter table speech_jobs alter column callback_cycle set default 1;`);
    // The claim walks this index in order: admin-owned jobs first, then oldest.
    this.addSql(`drop index if exists speech_jobs_queued_idx;`);
    this.addSql(`
      create index speech_jobs_claim_idx on speech_jobs (owner_is_admin desc, created_at, id)
        where status = 'queued' and cancel_requested_at is null;`);
    // A user's admin flag changes rarely; queued jobs follow it so the claim order stays right.
    this.addSql(`
      create function speech_jobs_follow_owner_admin() returns trigger language plpgsql as $$
      begin
        update speech_jobs set owner_is_admin = new.is_admin where owner_id = new.id and owner_is_admin <> new.is_admin;
        return new;
      end $$;`);
    this.addSql(`
      create trigger users_admin_flag_to_speech_jobs after update of is_admin on users
        for each row when (old.is_admin is distinct from new.is_admin) execute function speech_jobs_follow_owner_admin();`);

    this.addSql(`alter table speech_leases add column session_id varchar(64) null;`);
    // 'abandoned': the worker said Hello again without this lease (it restarted and lost the job).
    this.addSql(`alter table speech_leases drop constraint speech_leases_outcome_known,
      add constraint speech_leases_outcome_known check (outcome is null or outcome in ('completed','failed','expired','released','cancelled','abandoned'));`);
    this.addSql(`create index speech_leases_worker_open_idx on speech_leases (worker_id) where ended_at is null;`);

    this.addSql(`
      create table speech_notifications (
        id bigserial primary key,
        job_id integer not null references speech_jobs (id) on delete cascade,
        cycle integer not null,
        status varchar(16) not null,
        created_at timestamptz not null default now(),
        dispatched_at timestamptz null,
        constraint speech_notifications_cycle_unique unique (job_id, cycle),
        constraint speech_notifications_status_known check (status in ('completed', 'failed'))
      );`);
    this.addSql(`create index speech_notifications_pending_idx on speech_notifications (id) where dispatched_at is null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists speech_notifications;`);
    this.addSql(`drop index if exists speech_leases_worker_open_idx;`);
    this.addSql(`alter table speech_leases drop constraint speech_leases_outcome_known,
      add constraint speech_leases_outcome_known check (outcome is null or outcome in ('completed','failed','expired','released','cancelled'));`);
    this.addSql(`alter table speech_leases drop column if exists session_id;`);
    this.addSql(`drop trigger if exists users_admin_flag_to_speech_jobs on users;`);
    this.addSql(`drop function if exists speech_jobs_follow_owner_admin();`);
    this.addSql(`drop index if exists speech_jobs_claim_idx;`);
    this.addSql(`create index speech_jobs_queued_idx on speech_jobs (created_at, id) where status = 'queued';`);
    this.addSql(`alter table speech_jobs alter column callback_cycle set default 0;`);
    this.addSql(`alter table speech_jobs drop column if exists owner_is_admin, drop column if exists worker_fetchable, drop column if exists outcome;`);
  }
}
