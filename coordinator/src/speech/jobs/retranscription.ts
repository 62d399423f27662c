import type { AuthUser } from '../../accounts/types.js';
import type { Config } from '../../config.js';
import { AppError, forbidden } from '../../http/errors.js';
import { callbackBaseUrlProblem } from '../public-base-url.js';
import type { SpeechJob } from './entities.js';
import type { JobRepository } from './job-repository.js';
import type { JobService } from './job-service.js';
import type { ModelCatalog, ModelCatalogSnapshot } from './model-catalog.js';
import type { RevisionRepository, RevisionRow, RevisionSegment } from './revision-repository.js';

/** Why re-transcription is unavailable, in the words the job page and the API show. */
export const UNAVAILABLE = {
  notOwner: 'Only the owner can start a re-transcription.',
  notCompleted: 'The current pass is not completed.',
  diarizationPending: 'Speaker diarization is still pending.',
  diarizationRunning: 'Speaker diarization is still running.',
  analysisBusy: 'Transcript analysis is still pending or running.',
  translationsBusy: 'Translation work is still pending or running.',
  noMedia: 'No retained copy of the source media exists; re-transcription is not possible.',
  noModel: 'No other model is available.',
  noLocalModel: 'No other model is available on the local runner (a URL source is re-transcribed from its retained copy on the local runner only).',
} as const;

const releasedMessage = (at: Date) =>
  `The source media was released on ${at.toISOString().slice(0, 16).replace('T', ' ')} UTC; re-transcription is no longer possible.`;

/** Whether a job's diarization work is outstanding (it blocks a new pass). */
const diarizationBusy = (job: SpeechJob) => job.diarizationState === 'pending' || job.diarizationState === 'running';

/**
 * The models a new pass of `job` may use: served by a registered worker, able to take the job's
 * language, and not the current model. A URL source is re-transcribed from its retained copy on the
 * local runner only, so only the models the local runner serves (on SPEECH_LOCAL_MODELS) count.
 */
export function retranscriptionModels(job: Pick<SpeechJob, 'sourceType' | 'model' | 'language'>, catalog: ModelCatalogSnapshot): string[] {
  const pool = job.sourceType === 'url' ? catalog.localModels() : catalog.served();
  return pool.filter((m) => m !== job.model && catalog.refusal(m, job.language) === null);
}

export interface RetranscriptionState {
  job: SpeechJob;
  /** Model choices for a new pass (empty when none). */
  models: string[];
  canStart: boolean;
  unavailableReason: string | null;
  /** Earlier completed passes, newest first, each with its stored segments. */
  revisions: Array<{ revision: RevisionRow; segments: RevisionSegment[] }>;
}

/**
 * A refused start: 422 `validation_failed` (every re-transcription
 * guardrail answers so, diarization work pending included), the message also under `errors[field]`.
 */
function ruleFailure(field: string, message: string) {
  return new AppError('validation_failed', message, { errors: { [field]: [message] } });
}

/**
 * Re-transcription of a completed job with another model (completed jobs only, the
 * transition `retranscribe`): who may start it, which models it may use, and why it is unavailable. The move
 * itself (archive the pass, queue the next) is JobRepository.retranscribe's single statement.
 */
export class RetranscriptionService {
  constructor(
    private readonly config: Pick<Config, 'SPEECH_MAX_ATTEMPTS' | 'PUBLIC_BASE_URL'>,
    private readonly jobs: JobService,
    private readonly repo: JobRepository,
    private readonly revisions: RevisionRepository,
    private readonly catalog: ModelCatalog,
  ) {}

  /** Why `user` cannot start a new pass of `job` now, the first rule that fails; null when they can. */
  private async unavailableReason(user: AuthUser, job: SpeechJob, models: string[]): Promise<{ field: string; message: string } | null> {
    if (job.owner.id !== user.id) return { field: 'job', message: UNAVAILABLE.notOwner };
    if (job.status !== 'completed') return { field: 'status', message: UNAVAILABLE.notCompleted };
    if (diarizationBusy(job)) {
      return { field: 'diarization', message: job.diarizationState === 'running' ? UNAVAILABLE.diarizationRunning : UNAVAILABLE.diarizationPending };
    }
    if (job.analysis?.state === 'pending' || job.analysis?.state === 'running') return { field: 'analysis', message: UNAVAILABLE.analysisBusy };
    if ((await this.jobs.translations(job.id, job.currentPass)).some((t) => t.state === 'pending' || t.state === 'running')) {
      return { field: 'translations', message: UNAVAILABLE.translationsBusy };
    }
    if (!job.mediaPath) {
      const released = await this.revisions.mediaReleasedAt(job.id);
      return { field: 'media', message: released ? releasedMessage(released) : UNAVAILABLE.noMedia };
    }
    // A new pass starts a new notification cycle: its terminal callback must be sendable.
    const baseProblem = job.queueChannel === 'api' && job.callbackUrl ? callbackBaseUrlProblem(this.config.PUBLIC_BASE_URL) : null;
    if (baseProblem) return { field: 'callback_url', message: `the new pass's terminal callback cannot be sent: ${baseProblem}` };
    if (!models.length) return { field: 'model', message: job.sourceType === 'url' ? UNAVAILABLE.noLocalModel : UNAVAILABLE.noModel };
    return null;
  }

  /** GET /api/speech/jobs/{jobId}/revisions: anyone who may see the job may read it. */
  async state(user: AuthUser, jobId: number): Promise<RetranscriptionState> {
    const job = await this.jobs.getVisible(user, jobId);
    const [snapshot, rows] = await Promise.all([this.catalog.snapshot(), this.revisions.list(job.id)]);
    const models = retranscriptionModels(job, snapshot);
    const reason = await this.unavailableReason(user, job, models);
    const segments = await this.revisions.segments(
      job.id,
      rows.map((r) => r.pass),
    );
    return {
      job,
      models,
      canStart: reason === null,
      unavailableReason: reason?.message ?? null,
      revisions: rows.map((revision) => ({ revision, segments: segments.get(revision.pass) ?? [] })),
    };
  }

  /**
   * The owner starts a new pass with `model`: 404 for a job the caller cannot see, 403 for anyone
   * but the owner (administrators and queue managers included), 422 for every rule (under
   * `errors.diarization` while diarization is pending or running, `errors.status`, `errors.media`,
   * `errors.callback_url` when the job's callback could not be sent, or `errors.model`).
   */
  async start(user: AuthUser, jobId: number, model: string): Promise<SpeechJob> {
    const job = await this.jobs.getVisible(user, jobId);
    if (job.owner.id !== user.id) throw forbidden(UNAVAILABLE.notOwner);
    const models = retranscriptionModels(job, await this.catalog.snapshot());
    const reason = await this.unavailableReason(user, job, models);
    if (reason && reason.field !== 'model') throw ruleFailure(reason.field, reason.message);
    if (model === job.model) throw ruleFailure('model', `the current pass already used model "${model}"; choose another model`);
    if (!models.includes(model)) {
      const where = job.sourceType === 'url' ? ' on the local runner (a URL source is re-transcribed locally)' : '';
      throw ruleFailure(
        'model',
        models.length
          ? `model "${model}" is not available for a new pass${where}; available: ${models.join(', ')}`
          : `model "${model}" is not available for a new pass${where}; ${UNAVAILABLE.noModel}`,
      );
    }
    const moved = await this.repo.retranscribe({
      jobId: job.id,
      ownerId: user.id,
      by: user.username,
      model,
      retries: this.config.SPEECH_MAX_ATTEMPTS,
      local: job.sourceType === 'url',
    });
    if (!moved) {
      // Something changed between the read and the move (another request, diarization, retention).
      const now = await this.jobs.getVisible(user, jobId);
      const changed = await this.unavailableReason(user, now, retranscriptionModels(now, await this.catalog.snapshot()));
      throw changed ? ruleFailure(changed.field, changed.message) : ruleFailure('status', 'the job changed meanwhile; reload it and try again');
    }
    this.jobs.wakeWorkers();
    return this.jobs.getVisible(user, jobId);
  }
}
