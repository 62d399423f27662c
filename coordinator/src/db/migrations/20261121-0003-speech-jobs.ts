import { Migration } from '@mikro-orm/migrations';

export class Migration20261121000300SpeechJobs extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table speech_jobs (
        id serial primary key,
        owner_id integer not null references users (id) on delete cascade,
        status varchar(16) not null default 'queued',
        queue_channel varchar(8) not null default 'web',
        source_type varchar(8) not null,
        source_url text null,
        source_label varchar(300) null,
        source_note text null,
        source_filename varchar(300) null,
        source_mime varchar(120) null,
        source_size_bytes bigint null,
        source_duration_seconds double precision null,
        media_path text null,
        media_sha256 varchar(64) null,
        media_retained_until timestamptz null,
        model varchar(60) not null,
        language varchar(16) null,
        analysis_language varchar(16) null,
        translation_target_languages text[] not null default '{}',
        diarization_requested boolean not null default true,
        diarization_state varchar(16) not null default 'pending',
        execution_target varchar(8) not null default 'auto',
        target_worker_id integer null references speech_workers (id) on delete set null,
        current_pass integer not null default 1,
        attempt integer not null default 0,
        max_attempts integer not null default 3,
        stage_label varchar(120) null,
        stage_detail text null,
        audio_position_seconds double precision not null default 0,
        transcript_text text null,
        engine varchar(40) null,
        engine_model varchar(60) null,
        worker_id integer null references speech_workers (id) on delete set null,
        cancel_requested_at timestamptz null,
        failure_error text null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        started_at timestamptz null,
        finished_at timestamptz null,
        constraint speech_jobs_status_known check (status in ('queued','downloading','transcribing','finalizing','completed','failed')),
        constraint speech_jobs_channel_known check (queue_channel in ('web','api')),
        constraint speech_jobs_source_known check (source_type in ('url','upload')),
        constraint speech_jobs_target_known check (execution_target in ('auto','local','worker')),
        constraint speech_jobs_diarization_known check (diarization_state in ('pending','running','completed','failed','unavailable','skipped'))
      );`);
    // The claim query walks queued jobs oldest first; a partial index keeps it small.
    this.addSql(`create index speech_jobs_queued_idx on speech_jobs (created_at, id) where status = 'queued';`);
    this.addSql(`create index speech_jobs_owner_idx on speech_jobs (owner_id, id desc);`);

    this.addSql(`
      create table speech_leases (
        id serial primary key,
        job_id integer not null references speech_jobs (id) on delete cascade,
        attempt integer not null,
        worker_id integer not null references speech_workers (id) on delete cascade,
        token_hash varchar(64) not null,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        last_heartbeat_at timestamptz not null default now(),
        last_progress_at timestamptz null,
        ended_at timestamptz null,
        outcome varchar(16) null,
        constraint speech_leases_attempt_unique unique (job_id, attempt),
        constraint speech_leases_outcome_known check (outcome is null or outcome in ('completed','failed','expired','released','cancelled'))
      );`);
    this.addSql(`create index speech_leases_open_idx on speech_leases (expires_at) where ended_at is null;`);

    this.addSql(`
      create table speech_segments (
        id bigserial primary key,
        job_id integer not null references speech_jobs (id) on delete cascade,
        pass integer not null,
        seq integer not null,
        start_seconds double precision not null,
        end_seconds double precision not null,
        text text not null,
        speaker varchar(40) null,
        constraint speech_segments_seq_unique unique (job_id, pass, seq)
      );`);

    this.addSql(`
      create table speech_job_events (
        id bigserial primary key,
        job_id integer not null references speech_jobs (id) on delete cascade,
        at timestamptz not null default now(),
        level varchar(8) not null default 'info',
        event varchar(60) not null,
        message text not null,
        data jsonb null
      );`);
    this.addSql(`create index speech_job_events_job_idx on speech_job_events (job_id, id);`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists speech_job_events, speech_segments, speech_leases, speech_jobs cascade;');
  }
}
