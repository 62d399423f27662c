import { Migration } from '@mikro-orm/migrations';

/**
 * The speaker count a submitter stated for a job's diarization.
 *
 * speech_jobs.diarization_speakers: `{"num_speakers": n}` (exactly n speakers) or
 * `{"min_speakers": a, "max_speakers": b}` (bounds, either may be absent), each 1..32; null when
 * none was stated (the diarizer counts by itself). Set at submission, replaced by a diarization
 * rerun's request. Sent to the worker in the claim (contract 5, JobAssignment.num_speakers /
 * min_speakers / max_speakers); a worker of an older contract is never handed such a job.
 */
export class Migration20261207002600DiarizationSpeakers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table speech_jobs
      add column diarization_speakers jsonb null
        constraint speech_jobs_diarization_speakers_object check (diarization_speakers is null or jsonb_typeof(diarization_speakers) = 'object');`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table speech_jobs drop column if exists diarization_speakers;');
  }
}
