import type { AuthUser } from '../../accounts/types.js';
import { AppError, forbidden } from '../../http/errors.js';
import type { SpeechJob, StatedSpeakers } from '../jobs/entities.js';
import type { TranscriptFiles } from '../jobs/transcript-file.js';
import type { WorkAvailable } from '../jobs/job-events.js';
import type { JobRepository } from '../jobs/job-repository.js';
import type { JobService } from '../jobs/job-service.js';
import { DIARIZATION_TRANSITIONS } from '../jobs/job-transitions.js';
import { isSpeakerKey, speakerKey } from '../jobs/speakers.js';

const rule = (field: string, message: string) => new AppError('validation_failed', message, { errors: { [field]: [message] } });
/** Diarization already pending or running: a business rule (answered 422 under `errors.diarization`). */
const busy = (message: string) => rule('diarization', message);

/**
 * Rules around a job's speakers (DIARIZATION_TRANSITIONS): who may run or re-run diarization and
 * when, and the speaker editor. The state moves are JobRepository's.
 */
export class DiarizationService {
  constructor(
    private readonly jobs: JobService,
    private readonly repo: JobRepository,
    private readonly work: WorkAvailable,
    /** The TXT copy on disk carries the speakers' names: written again after a rename. */
    private readonly files?: Pick<TranscriptFiles, 'write'>,
  ) {}

  /** Only the transcript's owner changes its speakers (administrators and queue managers may read them). */
  private async ownJob(user: AuthUser, jobId: number, action: string): Promise<SpeechJob> {
    const job = await this.jobs.getVisible(user, jobId);
    if (job.owner.id !== user.id) throw forbidden(`Only the owner of the transcript may ${action}.`);
    return job;
  }

  /**
   * Run or re-run diarization: completed | failed | unavailable | skipped → pending on a job whose
   * transcript is completed and whose media is retained. Refused while one is pending or running
   * (422 under `errors.diarization`), without a completed transcript or after the media was released (422).
   * `speakers` (validated by the route's schema) replaces the job's stated speaker count; null: the diarizer counts.
   */
  async rerun(user: AuthUser, jobId: number, speakers: StatedSpeakers | null = null): Promise<SpeechJob> {
    const job = await this.ownJob(user, jobId, 'run speaker diarization');
    this.assertRerunnable(job);
    if (!(await this.repo.requestDiarization(job.id, user.username, speakers))) {
      // Someone else moved it in between: say why from the row as it is now.
      this.assertRerunnable(await this.jobs.getVisible(user, jobId));
      throw busy('Speaker diarization could not be requested because its state changed meanwhile; try again.');
    }
    // The owner's corrections of this pass stay in its history; the new speakers never mix with them silently.
    await this.repo.supersedeEdits(job.id, user.username);
    this.work.notify();
    return this.jobs.getVisible(user, jobId);
  }

  private assertRerunnable(job: SpeechJob) {
    const from: readonly string[] = DIARIZATION_TRANSITIONS.rerun.from;
    if (!from.includes(job.diarizationState)) throw busy(`Speaker diarization is already ${job.diarizationState}; wait for it to finish.`);
    if (job.status !== 'completed') throw rule('status', `the transcript is not completed (the job is ${job.status})`);
    if (!job.mediaPath) {
      const when = job.mediaRetainedUntil ? ` on ${job.mediaRetainedUntil.toISOString()}` : '';
      throw rule('media', `the source media was released${when}; speaker diarization cannot run again`);
    }
  }

  /**
   * The speaker editor: `names` maps speaker keys (S1, S2, …) of the current pass to names; an
   * empty name goes back to "Speaker N". Only keys the pass has are accepted.
   */
  async rename(user: AuthUser, jobId: number, names: Record<string, string>): Promise<SpeechJob> {
    const job = await this.ownJob(user, jobId, 'rename its speakers');
    const known = new Set((job.diarizationTurns ?? []).map(([, , s]) => speakerKey(s)));
    const unknown = Object.keys(names).filter((k) => !isSpeakerKey(k) || !known.has(k));
    if (!known.size) throw rule('speakers', 'this transcript has no speakers to rename; run speaker diarization first');
    if (unknown.length) throw rule('speakers', `unknown speaker ${unknown.join(', ')}; this transcript has ${[...known].join(', ')}`);
    if (job.diarizationState === 'pending' || job.diarizationState === 'running') {
      throw busy('Speaker diarization is running; its result replaces the speakers. Rename them when it has finished.');
    }
    await this.repo.setSpeakerLabels(job.id, names, user.username);
    await this.files?.write(job.id).catch(() => undefined);
    return this.jobs.getVisible(user, jobId);
  }
}
