import { Migration } from '@mikro-orm/migrations';

/**
 * Speaker diarization results and reruns, and re-transcription revisions.
 *
 * speech_jobs: the current pass's diarization (engine, speaker count, turns as
 * `[[start, end, speaker], ...]`, error), the rerun marker (`diarization_rerun_requested_at`, set by
 * a rerun request, cleared by any terminal diarization result), its retry count, and the speaker
 * editor state (`speaker_labels`: speaker key → the name the owner gave it).
 *
 * speech_leases.kind: a lease is for a transcription attempt (`transcribe`, the job is processing)
 * or for a diarization rerun of a completed job (`diarize`, the job stays completed). Both fence
 * the same way; a diarize lease also counts in the job's attempt sequence.
 *
 * speech_revisions: earlier completed passes, read-only. The segments of a revision stay in
 * speech_segments under their pass number; the row keeps everything else the pass had.
 */
export class Migration20261124001000DiarizationRevisions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table speech_jobs
        add column diarization_engine varchar(60) null,
        add column diarization_speaker_count integer null,
        add column diarization_turns jsonb null,
        add column diarization_error text null,
        add column diarization_updated_at timestamptz null,
        add column diarization_rerun_requested_at timestamptz null,
        add column diarization_attempts integer not null default 0,
        add column speaker_labels jsonb not null default '{}'::jsonb;`);
    // Rerun work a worker may claim: completed jobs whose diarization waits for a runner.
    this.addSql(`create index speech_jobs_diarize_idx on speech_jobs (diarization_rerun_requested_at, id)
      where status = 'completed' and diarization_state = 'pending' and diarization_rerun_requested_at is not null;`);
    this.addSql(`alter table speech_leases
      add column kind varchar(12) not null default 'transcribe',
      add constraint speech_leases_kind_known check (kind in ('transcribe','diarize'));`);
    this.addSql(`
      create table speech_revisions (
        id serial primary key,
        job_id integer not null references speech_jobs (id) on delete cascade,
        pass integer not null,
        model varchar(60) not null,
        language varchar(16) null,
        engine varchar(40) null,
        engine_model varchar(60) null,
        transcript_text text null,
        duration_seconds double precision null,
        diarization jsonb not null,
        speaker_labels jsonb not null default '{}'::jsonb,
        analysis jsonb null,
        translations jsonb not null default '[]'::jsonb,
        completed_at timestamptz null,
        archived_at timestamptz not null default now(),
        archived_by integer null references users (id) on delete set null,
        constraint speech_revisions_pass_unique unique (job_id, pass)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists speech_revisions;');
    this.addSql('alter table speech_leases drop constraint if exists speech_leases_kind_known, drop column if exists kind;');
    this.addSql('drop index if exists speech_jobs_diarize_idx;');
    this.addSql(`alter table speech_jobs drop column if exists diarization_engine, drop column if exists diarization_speaker_count,
      drop column if exists diarization_turns, drop column if exists diarization_error, drop column if exists diarization_updated_at,
      drop column if exists diarization_rerun_requested_at, drop column if exists diarization_attempts, drop column if exists speaker_labels;`);
  }
}
