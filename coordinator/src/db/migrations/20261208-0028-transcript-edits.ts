import { Migration } from '@mikro-orm/migrations';

/**
 * Corrections of a transcript by its owner (issue 38): speech_transcript_edits, one row per edit
 * of a pass (a segment's text, a segment or a run of its words moved to another speaker, two
 * speakers merged) with its author and time, what the pass held before (`before`: the rows it
 * changed, or the whole pass when it renumbered or relabelled many) and its state: `active`,
 * `undone` (by whom, when) or `superseded` (a diarization rerun started the speakers afresh).
 * speech_jobs.transcript_revised_at / transcript_revised_pass: when the current pass was last
 * corrected (the downloads then read the speaker turns from the corrected segments; an analysis or
 * translation older than that is out of date).
 */
export class Migration20261208002800TranscriptEdits extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table speech_transcript_edits (
      id serial primary key,
      job_id int not null references speech_jobs(id) on delete cascade,
      pass int not null,
      author_id int null references users(id) on delete set null,
      author_name text not null,
      at timestamptz not null default now(),
      kind text not null constraint speech_transcript_edits_kind check (kind in ('text', 'speaker', 'merge')),
      summary text not null,
      before jsonb not null,
      state text not null default 'active' constraint speech_transcript_edits_state check (state in ('active', 'undone', 'superseded')),
      undone_at timestamptz null,
      undone_by text null
    );`);
    this.addSql('create index speech_transcript_edits_job on speech_transcript_edits (job_id, pass, id);');
    this.addSql('alter table speech_jobs add column transcript_revised_at timestamptz null, add column transcript_revised_pass int null;');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists speech_transcript_edits;');
    this.addSql('alter table speech_jobs drop column if exists transcript_revised_at, drop column if exists transcript_revised_pass;');
  }
}
