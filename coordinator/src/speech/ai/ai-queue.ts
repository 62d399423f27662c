import type { Knex } from '@mikro-orm/postgresql';
import { Queue, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm.js';
import { closeWorker } from '../../queue/workers.js';
import type { AiKind, AiOutcome, AiTaskRef, JobRepository } from '../jobs/job-repository.js';
import { speakerAwareTranscript, type SpeakerLabels, type TranscriptSegment } from '../jobs/speakers.js';
import { AiAborted, AiProviderError, NO_PROVIDER_REASON, type AiProvider } from './provider.js';
import { analyseTranscript, analysisResultSchema, languageName, suggestTitle, translateTranscript, type AnalysisResult } from './work.js';
import { DrainLoop, drainOutbox } from '../../infra/drain-loop.js';

export const AI_QUEUE = 'speech-ai';

/** Undispatched tasks are looked for this often even when no transition kicked the dispatcher. */
const POLL_MS = 5_000;
const BATCH = 100;
/**
 * BullMQ attempts of one task. The provider's own retries (429/5xx) happen inside one attempt;
 * these are for work interrupted by a coordinator shutdown or crash, or a database error.
 */
const ATTEMPTS = 5;
const BACKOFF_MS = 2_000;

/** BullMQ job id of a task: (job, pass, kind, language, generation). BullMQ refuses ':' in custom ids. */
export const aiTaskJobId = (t: AiTaskRef) => `${t.jobId}-${t.pass}-${t.kind}-${t.language || 'x'}-${t.generation}`;

/** json / jsonb columns arrive parsed, or as text from some drivers' paths. */
const parsed = <T>(v: T | string | null): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : v);

interface TranscriptRow {
  transcript_text: string | null;
  language: string | null;
  speaker_labels: SpeakerLabels | string | null;
  analysis: { state?: string; result?: unknown } | string | null;
  segments: Array<{ seq: number; start: number; end: number; text: string; speaker: string | null }> | string | null;
}

/**
 * Transcript analysis, translations and automatic titles on the BullMQ queue `speech-ai`.
 *
 * JobRepository writes a speech_ai_tasks row in every statement that makes AI work pending; the
 * dispatcher here moves the rows into the queue and marks them dispatched in one PostgreSQL
 * transaction (drainOutbox, infra/drain-loop.ts), with the deterministic job id of aiTaskJobId, so a row dispatched twice is queued
 * once (like the notification outbox). The worker takes a task (pending → running, fenced by the
 * task's generation), calls the provider and stores the outcome through JobRepository, whose
 * guards drop a result that a newer generation superseded. On shutdown the in-flight provider
 * requests are aborted and their tasks go back to BullMQ (retried with backoff by whichever
 * coordinator is up); a crashed coordinator's active task is taken over by BullMQ's stalled-job
 * check. A task that runs again starts from `running`, and its result is stored once.
 */
export class AiQueue {
  readonly queue: Queue<AiTaskRef>;
  private worker: Worker<AiTaskRef> | null = null;
  private readonly loop: DrainLoop;
  /** One controller per task in progress: close() aborts them all. */
  private readonly aborts = new Set<AbortController>();
  /** Called when AI work of a job ended (the notification outbox waits for it). */
  private readonly settledListeners: Array<(jobId: number) => void> = [];

  constructor(
    private readonly deps: {
      orm: Orm;
      repo: JobRepository;
      redis: Redis;
      provider: AiProvider | null;
      logger: Logger;
      prefix: string;
      concurrency: number;
    },
  ) {
    this.queue = new Queue<AiTaskRef>(AI_QUEUE, { connection: deps.redis, prefix: deps.prefix });
    this.loop = new DrainLoop(
      () => this.drain(),
      (err: unknown) => this.deps.logger.warn({ err }, 'speech AI tasks not dispatched yet; will retry'),
    );
  }

  private get knex(): Knex {
    return this.deps.orm.em.getConnection().getKnex();
  }

  onSettled(listener: (jobId: number) => void) {
    this.settledListeners.push(listener);
  }

  start(): this {
    const { redis, prefix, logger, concurrency } = this.deps;
    this.worker = new Worker<AiTaskRef>(AI_QUEUE, (job) => this.process(job), {
      connection: redis.duplicate({ maxRetriesPerRequest: null }),
      prefix,
      concurrency,
    });
    this.worker.on('failed', (job, err) => {
      const final = job !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1);
      logger.warn(
        { task: job?.id, attempt: job?.attemptsMade, err: err.message },
        final ? 'speech AI task gave up' : 'speech AI task interrupted; it runs again',
      );
    });
    this.worker.on('error', (err) => logger.error({ err }, 'speech AI worker error'));
    this.deps.repo.onAiWork(this.kick);
    this.loop.start(POLL_MS);
    return this;
  }

  /** Dispatches waiting task rows (now, or right after the pass in progress). */
  readonly kick = () => this.loop.kick();

  /** Moves undispatched speech_ai_tasks rows into the queue; returns how many. */
  drain(): Promise<number> {
    return drainOutbox(this.knex, {
      table: 'speech_ai_tasks',
      batch: BATCH,
      take: async (trx, limit) =>
        (
          await trx.raw<{ rows: Array<{ id: number; job_id: number; pass: number; kind: AiKind; language: string; generation: number }> }>(
            `select id, job_id, pass, kind, language, generation from speech_ai_tasks where dispatched_at is null order by id limit ? for update skip locked`,
            [limit],
          )
        ).rows,
      publish: async (rows) => {
        await this.queue.addBulk(
          rows.map((r) => {
            const data: AiTaskRef = { jobId: Number(r.job_id), pass: Number(r.pass), kind: r.kind, language: r.language, generation: Number(r.generation) };
            return {
              name: r.kind,
              data,
              opts: {
                jobId: aiTaskJobId(data),
                attempts: ATTEMPTS,
                backoff: { type: 'exponential', delay: BACKOFF_MS },
                // Kept a week so a second dispatch of the same task is a no-op.
                removeOnComplete: { age: 7 * 86400, count: 10_000 },
                removeOnFail: { age: 30 * 86400, count: 10_000 },
              },
            };
          }),
        );
      },
    });
  }

  private settled(jobId: number) {
    for (const l of this.settledListeners) l(jobId);
  }

  /** One task (the BullMQ processor). Throws only to be tried again (shutdown, database trouble). */
  private async process(job: Job<AiTaskRef>): Promise<{ status: string }> {
    const ref = job.data;
    const provider = this.deps.provider;
    const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    const started = await this.deps.repo.startAi(ref, provider ? { label: provider.label, model: provider.model } : { label: 'none', model: 'none' });
    if (!started) return { status: 'stale' };
    let outcome: AiOutcome<unknown>;
    const abort = new AbortController();
    this.aborts.add(abort);
    if (this.loop.isClosed) abort.abort();
    try {
      outcome = provider ? await this.run(ref, provider, started, abort.signal) : unavailable(ref, NO_PROVIDER_REASON);
    } catch (err) {
      if (err instanceof AiProviderError) outcome = failed(ref, err.message);
      else if (!lastAttempt)
        throw err; // aborted by shutdown, or the database: BullMQ tries again
      else outcome = failed(ref, err instanceof AiAborted ? 'interrupted too often (coordinator restarts)' : `internal error: ${(err as Error).message}`);
    } finally {
      this.aborts.delete(abort);
    }
    const stored = await this.store(ref, outcome);
    this.settled(ref.jobId);
    return { status: stored ? outcome.state : 'stale' };
  }

  private async store(ref: AiTaskRef, outcome: AiOutcome<unknown>): Promise<boolean> {
    const { repo } = this.deps;
    if (ref.kind === 'analysis') return (await repo.finishAnalysis(ref, outcome)) !== null;
    if (ref.kind === 'translation')
      return repo.finishTranslation(ref, outcome as AiOutcome<{ text: string; segments: Array<{ seq: number; text: string }>; analysis: unknown }>);
    return (await repo.finishTitle(ref, outcome as AiOutcome<string>)) !== null;
  }

  private async transcript(jobId: number, pass: number): Promise<TranscriptRow | null> {
    const { rows } = await this.knex.raw<{ rows: TranscriptRow[] }>(
      `select j.transcript_text, j.language, j.speaker_labels, j.analysis,
              (select json_agg(json_build_object('seq', s.seq, 'start', s.start_seconds, 'end', s.end_seconds, 'text', s.text, 'speaker', s.speaker) order by s.seq)
                 from speech_segments s where s.job_id = j.id and s.pass = ?) as segments
         from speech_jobs j where j.id = ?`,
      [pass, jobId],
    );
    return rows[0] ?? null;
  }

  private async run(
    ref: AiTaskRef,
    provider: AiProvider,
    ctx: { language: string | null; sourceLanguage: string | null },
    signal: AbortSignal,
  ): Promise<AiOutcome<unknown>> {
    const row = await this.transcript(ref.jobId, ref.pass);
    if (!row) return failed(ref, 'the job no longer exists');
    const segments = parsed(row.segments) ?? [];
    const plain = row.transcript_text?.trim() || segments.map((s) => s.text.trim()).join(' ');
    if (!plain) return failed(ref, 'the transcript is empty (no speech detected)');
    if (ref.kind === 'analysis') {
      const turns = speakerAwareTranscript(
        segments.map((s) => ({ start: s.start, end: s.end, text: s.text, speaker: s.speaker })) satisfies TranscriptSegment[],
        parsed(row.speaker_labels) ?? {},
      );
      const run = await analyseTranscript(provider, turns ?? plain, { language: ctx.language, speakerAware: turns !== null, signal });
      const how = [turns !== null ? 'speaker-aware transcript' : 'transcript', run.parts > 1 ? `${run.parts} parts merged in ${run.requests} requests` : '']
        .filter(Boolean)
        .join(', ');
      return {
        state: 'completed',
        result: run.result,
        message: `Transcript analysis completed (${languageName(ctx.language)}; ${how}; ${provider.label}).`,
      };
    }
    if (ref.kind === 'translation') {
      const analysis = parsed(row.analysis);
      const current = analysis?.state === 'completed' ? analysisResultSchema.safeParse(analysis.result) : null;
      const run = await translateTranscript(provider, {
        segments: segments.length ? segments.map((s) => ({ seq: s.seq, text: s.text })) : [{ seq: 0, text: plain }],
        analysis: current?.success ? (current.data satisfies AnalysisResult) : null,
        source: ctx.sourceLanguage,
        target: ref.language,
        signal,
      });
      return {
        state: 'completed',
        result: { text: run.text, segments: run.segments, analysis: run.analysis },
        message: `Translation into ${languageName(ref.language)} completed (${run.segments.length} segments${run.analysis ? ' and the analysis' : ''}; ${provider.label}).`,
      };
    }
    const title = await suggestTitle(provider, plain, ctx.sourceLanguage, signal);
    return { state: 'completed', result: title, message: '' };
  }

  /** Aborts in-flight provider requests (their tasks are retried later), then closes the worker and the queue. */
  async close() {
    const loop = this.loop.close();
    for (const a of this.aborts) a.abort();
    await loop;
    await closeWorker(this.worker);
    await this.queue.close();
  }
}

const what = (ref: AiTaskRef) =>
  ref.kind === 'analysis' ? 'Transcript analysis' : ref.kind === 'translation' ? `Translation into ${languageName(ref.language)}` : 'Title generation';

function failed(ref: AiTaskRef, error: string): AiOutcome<never> {
  const tail = ref.kind === 'title' ? ' (the job is not affected)' : '';
  return { state: 'failed', error, message: `${what(ref)} failed${tail}: ${error}` };
}

function unavailable(ref: AiTaskRef, reason: string): AiOutcome<never> {
  return { state: 'unavailable', error: reason, message: `${what(ref)} unavailable: ${reason}` };
}
