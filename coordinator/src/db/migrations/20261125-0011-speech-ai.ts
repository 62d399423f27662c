import { Migration } from '@mikro-orm/migrations';

/**
 * Transcript analysis, translations and generated titles (an OpenAI-compatible provider).
 *
 * speech_jobs.analysis: the current pass's analysis as one JSON record (state, language, provider,
 * model, generation, result, error, updated_at; documented in README.md, "AI analysis, translations and titles").
 * speech_jobs.auto_title: the automatic title of an uploaded file (state, title, error, updated_at).
 * speech_jobs.source_label_edited: the owner saved a title of their own; automatic titles never
 * replace it.
 *
 * speech_translations: one row per (job, pass, language) of translation_target_languages, with
 * its state, translated text and segments and the translated analysis. `generation` grows when
 * the row is queued again (a new analysis to translate), so late results of an older run are
 * dropped.
 *
 * speech_ai_tasks: the transactional outbox of AI work, written in the statement that makes the
 * work pending (the completion of a pass, an analysis request, a diarization rerun that found more
 * speakers) and moved to the BullMQ queue speech-ai by AiDispatcher. One row per (job, pass, kind,
 * language, generation), which is also the BullMQ job id: dispatching twice queues once.
 */
export class Migration20261125001100SpeechAi extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table speech_jobs
        add column analysis jsonb null,
        add column auto_title jsonb null,
        add column source_label_edited boolean not null default false;`);
    this.addSql(`
      create table speech_translations (
        id serial primary key,
        job_id integer not null references speech_jobs (id) on delete cascade,
        pass integer not null,
        language varchar(16) not null,
        state varchar(16) not null,
        generation integer not null default 1,
        text text null,
        segments jsonb null,
        analysis jsonb null,
        provider varchar(200) null,
        model varchar(200) null,
        error text null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint speech_translations_language_unique unique (job_id, pass, language),
        constraint speech_translations_state_known check (state in ('pending','running','completed','failed','unavailable'))
      );`);
    this.addSql(`
      create table speech_ai_tasks (
        id bigserial primary key,
        job_id integer not null references speech_jobs (id) on delete cascade,
        pass integer not null,
        kind varchar(16) not null,
        language varchar(16) not null default '',
        generation integer not null,
        created_at timestamptz not null default now(),
        dispatched_at timestamptz null,
        constraint speech_ai_tasks_unique unique (job_id, pass, kind, language, generation),
        constraint speech_ai_tasks_kind_known check (kind in ('analysis','translation','title'))
      );`);
    this.addSql(`create index speech_ai_tasks_pending_idx on speech_ai_tasks (id) where dispatched_at is null;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists speech_ai_tasks;');
    this.addSql('drop table if exists speech_translations;');
    this.addSql('alter table speech_jobs drop column if exists analysis, drop column if exists auto_title, drop column if exists source_label_edited;');
  }
}
