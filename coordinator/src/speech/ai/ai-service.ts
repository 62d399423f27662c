import { hasPermission, type AuthUser } from '../../accounts/types.js';
import { AppError, forbidden } from '../../http/errors.js';
import type { SpeechJob } from '../jobs/entities.js';
import type { JobRepository } from '../jobs/job-repository.js';
import { JobService } from '../jobs/job-service.js';
import { AiProviderError, NO_PROVIDER_REASON, type AiProvider } from './provider.js';
import { suggestTitle } from './work.js';

const rule = (field: string, message: string) => new AppError('validation_failed', message, { errors: { [field]: [message] } });

/**
 * Rules of the AI actions on a job: on-demand analysis, title suggestions and the metadata form.
 * The state moves are JobRepository's; the queued work runs in AiQueue.
 */
export class AiService {
  constructor(
    private readonly jobs: JobService,
    private readonly repo: JobRepository,
    private readonly provider: AiProvider | null,
  ) {}

  /** 403 without AI-provider access (administrators always have it), 503 when no provider is configured. */
  private assertAiAccess(user: AuthUser): AiProvider {
    if (!hasPermission(user, 'provider_openai')) throw forbidden('AI-provider access (permission provider_openai) is required.');
    if (!this.provider) throw new AppError('service_unavailable', NO_PROVIDER_REASON);
    return this.provider;
  }

  private assertTranscript(job: SpeechJob) {
    if (job.status !== 'completed') throw rule('status', `the transcript does not exist yet (the job is ${job.status})`);
    if (!job.transcriptText?.trim()) throw rule('transcript', 'the transcript is empty (no speech detected)');
  }

  /**
   * POST analyze: the owner or a queue manager, with AI access; the transcript must exist; 422
   * (under `analysis`) while an analysis is pending or running. Queues a new generation of the analysis (its
   * translations follow when it completes).
   */
  async analyze(user: AuthUser, jobId: number): Promise<SpeechJob> {
    const job = await this.jobs.getVisible(user, jobId);
    if (job.owner.id !== user.id && !JobService.canManageAll(user)) throw forbidden('Only the owner or a queue manager may analyse this transcript.');
    this.assertAiAccess(user);
    this.assertTranscript(job);
    if (!(await this.repo.requestAnalysis(job.id, user.username))) {
      const now = await this.jobs.getVisible(user, jobId);
      this.assertTranscript(now);
      // A business rule, as the specification's speech errors have them (422; it has no 409).
      throw rule('analysis', `an analysis is already ${now.analysis?.state ?? 'running'}; wait for it to finish`);
    }
    return this.jobs.getVisible(user, jobId);
  }

  /** A title suggestion for the metadata form (owner only): nothing is saved. */
  async suggestTitle(user: AuthUser, jobId: number): Promise<string> {
    const job = await this.jobs.getVisible(user, jobId);
    if (job.owner.id !== user.id) throw forbidden('Only the owner may retitle this job.');
    const provider = this.assertAiAccess(user);
    this.assertTranscript(job);
    try {
      return await suggestTitle(provider, job.transcriptText ?? '', job.language);
    } catch (err) {
      if (err instanceof AiProviderError) throw new AppError('service_unavailable', `The AI provider could not suggest a title: ${err.message}`);
      throw err;
    }
  }

  /** The metadata form (owner only): title and note. */
  async updateMetadata(user: AuthUser, jobId: number, change: { label?: string | null; note?: string | null }): Promise<SpeechJob> {
    const job = await this.jobs.getVisible(user, jobId);
    if (job.owner.id !== user.id) throw forbidden('Only the owner may change the title and note.');
    if (change.label === undefined && change.note === undefined) throw rule('source_label', 'send source_label, source_note or both');
    await this.repo.updateMetadata(job.id, change, user.username);
    return this.jobs.getVisible(user, jobId);
  }
}
