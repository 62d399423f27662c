import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import { OutboundPolicy, OutboundRefused, type JobStatus, type QueueChannel } from '@sonar/shared';
import { PersonalAccessToken, User } from '../../accounts/entities.js';
import { hasPermission, type AuthUser } from '../../accounts/types.js';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import { AppError, forbidden, notFound } from '../../http/errors.js';
import { SpeechWorker } from '../workers/entities.js';
import { targetIncompatibility } from '../workers/compatibility.js';
import { SpeechJob, SpeechJobEvent, SpeechLease, SpeechSegment, type ExecutionTarget, type StatedSpeakers, type TranslationRow } from './entities.js';
import type { WorkAvailable } from './job-events.js';
import type { JobRepository, NewJobEvent } from './job-repository.js';
import { PROCESSING_STATUSES, isProcessing } from './job-transitions.js';
import { ModelCatalog, type ModelCatalogSnapshot } from './model-catalog.js';
import type { MediaStore } from './media-store.js';
import type { JobDetail, ListedJob } from './presenter.js';
import { probeMedia } from './probe.js';
import { callbackBaseUrlProblem } from '../public-base-url.js';
import { sourceRouting, workerMayFetch } from './url-sources.js';
import { speakerAwareTranscript, speakerStats, statedSpeakersText, type StoredTurn, type TranscriptSegment } from './speakers.js';
import { downloadOfJob, type DownloadTranscript } from './transcript-formats.js';

export interface CreateJobInput {
  channel: QueueChannel;
  source: { type: 'url'; url: string } | { type: 'upload'; tempPath: string; filename: string; sizeBytes: number; sha256: string };
  label?: string | undefined;
  note?: string | undefined;
  model?: string | undefined;
  language?: string | undefined;
  analysisLanguage?: string | undefined;
  translationTargetLanguages?: string[] | undefined;
  diarization?: boolean | undefined;
  /** The speaker count stated for the diarization (validated by the submission schema); null or absent: none. */
  speakers?: StatedSpeakers | null | undefined;
  /** Token API: the terminal callback target (the job starts with callback status `pending`, cycle 1). */
  callbackUrl?: string | undefined;
  /** Token API: the personal token that submitted the job. */
  apiTokenId?: number | undefined;
}

function businessRule(field: string, message: string) {
  return new AppError('validation_failed', message, { errors: { [field]: [message] } });
}

/**
 * Rules of the speech queue: who sees which job and who may move it. The moves themselves are
 * JobRepository's (the one owner of job state); the database is the source of truth.
 */
/** A job's stored speaker turns, sorted; a `conflict` AppError while it has no completed diarization. */
export function completedTurns(job: Pick<SpeechJob, 'diarizationState' | 'diarizationTurns'>): StoredTurn[] {
  if (job.diarizationState !== 'completed' || !job.diarizationTurns) {
    throw new AppError('conflict', `This transcript has no speaker turns (speaker diarization is ${job.diarizationState}).`);
  }
  return [...job.diarizationTurns].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

/**
 * How long job creation may reuse a model-catalog snapshot that accepts a job (JobService.catalogFor):
 * a worker that stops serving a model (or loses its presence) may still have jobs for it accepted
 * for this long, as if it had gone away just after they were queued.
 */
const CATALOG_REUSE_MS = 1_000;

export class JobService {
  /** The last model-catalog snapshot job creation read, and when. */
  private catalog: { at: number; snapshot: ModelCatalogSnapshot } | null = null;

  constructor(
    private readonly orm: Orm,
    private readonly config: Config,
    private readonly media: MediaStore,
    private readonly work: WorkAvailable,
    private readonly repo: JobRepository,
    private readonly outbound: OutboundPolicy = new OutboundPolicy(config.OUTBOUND_ALLOW_RANGES),
  ) {}

  private em(): EntityManager {
    return this.orm.em.fork();
  }

  static canManageAll(user: AuthUser) {
    return hasPermission(user, 'speech.manage');
  }

  /** Models a job may ask for: what registered workers really serve (ModelCatalog). */
  async supportedModels(): Promise<string[]> {
    return (await new ModelCatalog(this.orm, this.config).snapshot()).served();
  }

  /**
   * The model catalog for a new job. A snapshot read within CATALOG_REUSE_MS is used again when it
   * accepts the job with a connected worker for its model; anything else (a refusal, a model only
   * offline workers serve) is read again, so a refusal or an offline note is never stale. (With a
   * thousand registered workers the read costs PostgreSQL 2–4 ms: in a burst of submissions it was
   * most of each job's cost.)
   */
  private async catalogFor(model: string, language: string | undefined): Promise<ModelCatalogSnapshot> {
    const cached = this.catalog;
    if (cached && Date.now() - cached.at < CATALOG_REUSE_MS && !cached.snapshot.refusal(model, language) && !cached.snapshot.offlineNote(model)) {
      return cached.snapshot;
    }
    const snapshot = await new ModelCatalog(this.orm, this.config).snapshot();
    this.catalog = { at: Date.now(), snapshot };
    return snapshot;
  }

  async create(owner: AuthUser, input: CreateJobInput): Promise<SpeechJob> {
    const model = input.model ?? this.config.SPEECH_DEFAULT_MODEL;
    // A model (or language) no registered worker can run is refused; one only offline workers serve is flagged.
    const catalog = await this.catalogFor(model, input.language);
    const refusal = catalog.refusal(model, input.language);
    if (refusal) {
      if (input.source.type === 'upload') await this.media.discard(input.source.tempPath);
      throw businessRule(refusal.field, refusal.message);
    }
    const offline = catalog.offlineNote(model);
    // Server-side request forgery guard: URLs the coordinator will fetch or call (source_url, callback_url).
    if (input.source.type === 'url') await this.assertOutbound('source_url', input.source.url);
    if (input.callbackUrl) {
      await this.assertOutbound('callback_url', input.callbackUrl, input.source);
      // Refused now rather than lost later: the callback would carry a job_url nobody else can open.
      const baseProblem = callbackBaseUrlProblem(this.config.PUBLIC_BASE_URL);
      if (baseProblem) {
        if (input.source.type === 'upload') await this.media.discard(input.source.tempPath);
        throw businessRule('callback_url', `no callback can be sent from this coordinator: ${baseProblem}; nothing was queued`);
      }
    }
    let probe: Awaited<ReturnType<typeof probeMedia>> | null = null;
    if (input.source.type === 'upload') {
      try {
        probe = await probeMedia(input.source.tempPath);
      } catch (err) {
        await this.media.discard(input.source.tempPath);
        throw businessRule('media_file', `"${input.source.filename}" is not readable audio or video: ${(err as Error).message}`);
      }
      if (!probe.hasAudio) {
        await this.media.discard(input.source.tempPath);
        throw businessRule('media_file', 'the file has no audio stream');
      }
    }
    const source = input.source;
    // What a new job starts with, whichever way it is queued.
    const settings = {
      model,
      language: input.language ?? null,
      analysisLanguage: input.analysisLanguage ?? null,
      translationTargetLanguages: input.translationTargetLanguages ?? [],
      diarizationRequested: input.diarization ?? true,
      diarizationState: input.diarization === false ? ('skipped' as const) : ('pending' as const),
      diarizationSpeakers: input.diarization === false ? null : (input.speakers ?? null),
      maxAttempts: this.config.SPEECH_MAX_ATTEMPTS,
      stageLabel: 'Waiting for a worker',
    };
    const stated = settings.diarizationSpeakers ? `; speakers stated: ${statedSpeakersText(settings.diarizationSpeakers)}` : '';
    const events: NewJobEvent[] = [{ event: 'queued', level: 'info', message: `Queued on the ${input.channel} channel with model ${model}${stated}.` }];
    if (offline) events.push({ event: 'no_worker', level: 'warn', message: `${offline}; the job waits until one connects.` });
    if (source.type === 'url') {
      // One statement (the row and its runtime log), mapped to its entity: a burst of submissions
      // costs one round trip each instead of an ORM transaction of four.
      const row = await this.repo.queueUrlJob(
        {
          ownerId: owner.id,
          ownerIsAdmin: owner.isAdmin,
          workerFetchable: workerMayFetch(source.url, await sourceRouting(this.config)),
          channel: input.channel,
          sourceUrl: source.url,
          label: input.label ?? null,
          note: input.note ?? null,
          ...settings,
          apiTokenId: input.apiTokenId ?? null,
          callbackUrl: input.callbackUrl ?? null,
          callbackStatus: input.callbackUrl ? 'pending' : null,
        },
        events,
      );
      const queued = this.em().map(SpeechJob, row);
      this.work.notifyNew();
      return queued;
    }
    const inserted: { id?: number } = {};
    let job: SpeechJob;
    try {
      // One transaction: a worker cannot claim the row before its uploaded media is in place, and a
      // failure leaves neither a job nor a file behind.
      job = await this.em().transactional(async (em) => {
        const created = em.create(SpeechJob, {
          status: 'queued',
          owner: em.getReference(User, owner.id),
          ownerIsAdmin: owner.isAdmin,
          workerFetchable: false,
          queueChannel: input.channel,
          sourceType: source.type,
          sourceFilename: source.filename,
          sourceLabel: input.label ?? source.filename,
          sourceNote: input.note ?? null,
          sourceMime: probe?.mime ?? null,
          sourceSizeBytes: source.sizeBytes,
          sourceDurationSeconds: probe?.durationSeconds ?? null,
          mediaSha256: source.sha256,
          ...settings,
          apiToken: input.apiTokenId === undefined ? null : em.getReference(PersonalAccessToken, input.apiTokenId),
          callbackUrl: input.callbackUrl ?? null,
          callbackStatus: input.callbackUrl ? 'pending' : null,
        });
        await em.flush();
        inserted.id = created.id;
        created.mediaPath = await this.media.adopt(created.id, source.tempPath, path.extname(source.filename));
        created.mediaRetainedUntil = this.retentionDeadline();
        // The row is born queued in this unit of work; every later move of it is JobRepository's.
        for (const e of events) em.create(SpeechJobEvent, { job: created, event: e.event, level: e.level, message: e.message });
        return created;
      });
    } catch (err) {
      await this.media.discard(source.tempPath);
      if (inserted.id !== undefined) await this.media.removeJob(inserted.id);
      throw err;
    }
    this.work.notifyNew();
    return job;
  }

  /**
   * 422 under `field` when the outbound policy refuses the URL (loopback, private, link-local or
   * metadata addresses, credentials, other schemes). A name that does not resolve now passes: the
   * download or delivery checks every address again when it connects.
   */
  private async assertOutbound(field: string, url: string, source?: CreateJobInput['source']) {
    try {
      await this.outbound.assertPublic(url, { allowUnresolved: true });
    } catch (err) {
      if (!(err instanceof OutboundRefused)) throw err;
      if (source?.type === 'upload') await this.media.discard(source.tempPath);
      throw businessRule(field, `the URL is not allowed: ${err.message}`);
    }
  }

  retentionDeadline(): Date | null {
    const days = this.config.SPEECH_MEDIA_RETENTION_DAYS;
    return days > 0 ? new Date(Date.now() + days * 86400_000) : null;
  }

  /** A job the caller may see, or 404 (never 403: other people's job ids are not confirmed). */
  async getVisible(user: AuthUser, jobId: number, channel?: QueueChannel): Promise<SpeechJob> {
    const job = await this.em().findOne(SpeechJob, { id: jobId }, { populate: ['owner', 'targetWorker'] });
    if (!job || (channel && job.queueChannel !== channel)) throw notFound('Job not found.');
    if (job.owner.id !== user.id && !JobService.canManageAll(user)) throw notFound('Job not found.');
    return job;
  }

  /** The jobs the caller sees, newest first, as list entries (`presentJob`). */
  async list(user: AuthUser, opts: { limit: number; channel?: QueueChannel; all?: boolean }): Promise<ListedJob[]> {
    return this.repo.listJobs({ ownerId: opts.all && JobService.canManageAll(user) ? null : user.id, channel: opts.channel, limit: opts.limit });
  }

  async summary(user: AuthUser, channel?: QueueChannel) {
    const all = JobService.canManageAll(user);
    const params: unknown[] = [];
    let where = 'true';
    if (!all) {
      where += ' and owner_id = ?';
      params.push(user.id);
    }
    if (channel) {
      where += ' and queue_channel = ?';
      params.push(channel);
    }
    const rows = await this.em()
      .getConnection()
      .execute<Array<{ status: JobStatus; n: string }>>(`select status, count(*) as n from speech_jobs where ${where} group by status`, params);
    const count = (s: JobStatus[]) => rows.filter((r) => s.includes(r.status)).reduce((a, r) => a + Number(r.n), 0);
    return {
      summary: { queued: count(['queued']), processing: count([...PROCESSING_STATUSES]), completed: count(['completed']), failed: count(['failed']) },
      canManageAll: all,
    };
  }

  async detail(job: SpeechJob): Promise<JobDetail> {
    const em = this.em();
    const lease = await em.findOne(SpeechLease, { job: job.id, attempt: job.attempt }, { populate: ['worker'] });
    const events = await em.find(SpeechJobEvent, { job: job.id }, { orderBy: { id: 'asc' }, limit: 500 });
    // The one segment count (transitions/segment-count.ts): the stored segments of the pass that hold text.
    const segmentCount = await em.count(SpeechSegment, { job: job.id, pass: job.currentPass, text: { $re: '\\S' } });
    // Speakers exist once a diarization labelled the pass (a failed rerun keeps the earlier labels).
    const labelled = job.diarizationTurns !== null ? await this.transcriptSegments(job.id, job.currentPass) : [];
    return {
      lease: lease ? Object.assign(lease, { workerName: lease.worker.name, workerRevoked: lease.worker.revokedAt !== null }) : null,
      events,
      translations: await this.translations(job.id, job.currentPass),
      segmentCount,
      speakerStats: speakerStats(labelled),
      speakerAwareTranscript: speakerAwareTranscript(labelled, job.speakerLabels),
    };
  }

  /** The translations of a pass, by language. */
  async translations(jobId: number, pass: number): Promise<TranslationRow[]> {
    return this.em()
      .getConnection()
      .execute<TranslationRow[]>(
        `select language, state, generation, text, segments, analysis, provider, model, error, updated_at
           from speech_translations where job_id = ? and pass = ? order by language`,
        [jobId, pass],
      );
  }

  /** A pass's segments as the speaker helpers read them (speakers.ts). */
  async transcriptSegments(jobId: number, pass: number): Promise<TranscriptSegment[]> {
    const rows = await this.em()
      .getConnection()
      .execute<Array<{ start_seconds: number; end_seconds: number; text: string; speaker: string | null }>>(
        'select start_seconds, end_seconds, text, speaker from speech_segments where job_id = ? and pass = ? order by seq',
        [jobId, pass],
      );
    return rows.map((r) => ({ start: Number(r.start_seconds), end: Number(r.end_seconds), text: r.text, speaker: r.speaker }));
  }

  /**
   * A visible job's current pass as the downloads read it (downloadOfJob; the share page builds
   * its own with the same function). 404 when the job is not visible; with `turns` (the RTTM
   * download) 409 while it has no completed diarization (never requested, skipped, still pending
   * or running, failed, or unavailable).
   */
  async download(user: AuthUser, jobId: number, opts: { turns: boolean }): Promise<DownloadTranscript> {
    const job = await this.getVisible(user, jobId);
    if (opts.turns) completedTurns(job);
    return downloadOfJob(job, await this.segments(job.id, job.currentPass), { shared: false });
  }

  /** A completed job's current pass as the downloads read it, whoever asks (the TXT copy on disk); null for any other job. */
  async completedTranscript(jobId: number): Promise<DownloadTranscript | null> {
    const job = await this.em().findOne(SpeechJob, { id: jobId });
    if (!job || job.status !== 'completed') return null;
    return downloadOfJob(job, await this.segments(job.id, job.currentPass), { shared: false });
  }

  async segments(jobId: number, pass: number) {
    return this.em().find(SpeechSegment, { job: jobId, pass }, { orderBy: { seq: 'asc' } });
  }

  private assertMayChange(user: AuthUser, job: SpeechJob) {
    if (job.owner.id !== user.id && !JobService.canManageAll(user)) throw forbidden('Only the owner or a queue manager may change this job.');
  }

  /** Cooperative cancellation: the worker hears it on its next heartbeat and stops the engine. */
  async cancel(user: AuthUser, jobId: number): Promise<SpeechJob> {
    const job = await this.getVisible(user, jobId);
    this.assertMayChange(user, job);
    if (!isProcessing(job.status) || !(await this.repo.requestCancel(job.id, user.username))) {
      throw businessRule('status', `only a processing job can be cancelled; this one is ${(await this.getVisible(user, jobId)).status}`);
    }
    return this.getVisible(user, jobId);
  }

  /** failed or queued → queued, with a fresh retry budget (a person decided to try again). */
  async restart(user: AuthUser, jobId: number): Promise<SpeechJob> {
    const job = await this.getVisible(user, jobId);
    this.assertMayChange(user, job);
    if (job.status !== 'failed' && job.status !== 'queued') {
      throw businessRule('status', `only a failed or queued job can be restarted; this one is ${job.status}`);
    }
    if (job.sourceType === 'upload' && !job.mediaPath) throw businessRule('media_file', 'the uploaded media is no longer retained');
    const moved = await this.repo.restart([job.id], this.config.SPEECH_MAX_ATTEMPTS, `Restarted by ${user.username}.`);
    if (!moved.length) throw businessRule('status', `only a failed or queued job can be restarted; this one is ${(await this.getVisible(user, jobId)).status}`);
    this.work.notify();
    return this.getVisible(user, jobId);
  }

  /**
   * Run-now helper (managers): the oldest `limit` failed jobs are queued again like restart() does
   * (fresh retry budget, next notification cycle, runtime log `restarted`). Uploads whose media is
   * gone are skipped. Returns the ids queued again.
   */
  async requeueFailed(user: AuthUser, limit: number): Promise<number[]> {
    if (!JobService.canManageAll(user)) throw forbidden('The permission "speech.manage" is required.');
    // The run-now route wakes the workers afterwards.
    return this.repo.restart(await this.repo.oldestFailed(limit), this.config.SPEECH_MAX_ATTEMPTS, `Queued again by ${user.username} (run now).`);
  }

  /** Jobs waiting in the queue (all users and channels). */
  async queuedCount(): Promise<number> {
    const rows = await this.em().getConnection().execute<Array<{ n: string }>>(`select count(*) as n from speech_jobs where status = 'queued'`);
    return Number(rows[0]?.n ?? 0);
  }

  /** Wakes workers' claim long-polls (on every coordinator). */
  wakeWorkers() {
    this.work.notify();
  }

  /** Deletes a job that is not processing, with its revisions, segments, log and media. */
  async remove(user: AuthUser, jobId: number): Promise<void> {
    const job = await this.getVisible(user, jobId);
    this.assertMayChange(user, job);
    if (!(await this.repo.delete(job.id))) throw businessRule('status', 'a processing job cannot be deleted; cancel it first');
    await this.media.removeJob(job.id);
    await rm(this.media.transcriptFile(job.id), { force: true });
  }

  /** Admin: automatic, local, or an exact named worker (which may be offline now). */
  async setExecutionTarget(user: AuthUser, jobId: number, target: { mode: ExecutionTarget; worker?: string }): Promise<SpeechJob> {
    if (!user.isAdmin) throw forbidden('Only administrators choose execution targets.');
    const job = await this.getVisible(user, jobId);
    const em = this.em();
    let workerId: number | null = null;
    if (target.mode === 'worker') {
      const worker = target.worker ? await em.findOne(SpeechWorker, { name: target.worker }) : null;
      if (!worker || worker.revokedAt) throw businessRule('worker', `no active worker named "${target.worker ?? ''}"`);
      // A fresh worker with a known claim-capability mismatch cannot be NEWLY
      // saved as the target (the job's current target may be saved again).
      const fresh = worker.lastSeenAt !== null && Date.now() - worker.lastSeenAt.getTime() < this.config.WORKER_PRESENCE_TTL_MS;
      const why = targetIncompatibility({
        name: worker.name,
        fresh,
        revoked: false,
        contractVersion: worker.contractVersion,
        capabilities: worker.capabilities,
      });
      if (why && job.targetWorker?.id !== worker.id) throw businessRule('worker', `worker "${worker.name}" is incompatible: ${why}`);
      workerId = worker.id;
    }
    await this.repo.setTarget(
      job.id,
      target.mode,
      workerId,
      `Execution target set to ${target.mode === 'worker' ? `worker ${target.worker}` : target.mode} by ${user.username}.`,
    );
    this.work.notify();
    return this.getVisible(user, jobId);
  }

  /** A runtime-log entry (written by the job-state owner). */
  log(jobId: number, event: string, message: string) {
    return this.repo.log(jobId, event, message);
  }
}
