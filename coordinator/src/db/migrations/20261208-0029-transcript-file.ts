import { Migration } from '@mikro-orm/migrations';

/**
 * The auxiliary TXT copy of a completed job's transcript (the specification's "TXT artifact"):
 * `<SPEECH_MEDIA_DIR>/transcripts/<job id>.txt`, written after each completion and diarization
 * rerun. speech_jobs.transcript_file_at: when it was last written; transcript_file_error: why the
 * last write failed (degraded storage; the database transcript stays authoritative and the job
 * completed), null after a good write.
 */
export class Migration20261208002900TranscriptFile extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table speech_jobs
      add column transcript_file_at timestamptz null,
      add column transcript_file_error text null;`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table speech_jobs drop column if exists transcript_file_at, drop column if exists transcript_file_error;');
  }
}
