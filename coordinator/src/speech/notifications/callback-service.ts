import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Knex } from '@mikro-orm/postgresql';
import { JOB_STATUS_LABELS, OutboundPolicy, OutboundRefused, QUEUE_CHANNEL_LABELS, type JobStatus, type QueueChannel } from '@sonar/shared';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import { readPlatformVersion } from '../../version.js';
import { closeWorker } from '../../queue/workers.js';
import type { JobRepository } from '../jobs/job-repository.js';
import { shareUrl as sharePageUrl } from '../shares/share-links.js';
import { speakerAwareTranscript, type SpeakerLabels, type TranscriptSegment } from '../jobs/speakers.js';
import type { AnalysisRecord } from '../jobs/entities.js';
import { SEGMENT_COUNT } from '../jobs/transitions/segment-count.js';
import { analysisText } from '../ai/work.js';
import { callbackBaseUrlProblem, isLocalBaseUrl } from '../public-base-url.js';

export const CALLBACK_QUEUE = 'speech-callbacks';
/** Name of the custom backoff strategy (exponential with full jitter) that the Worker implements. */
const BACKOFF_TYPE = 'exponential-full-jitter';
const MAX_BACKOFF_MS = 3_600_000;
const MAX_ERROR_LENGTH = 300;

export type TerminalStatus = 'completed' | 'failed';

export interface CallbackDelivery {
  jobId: number;
  cycle: number;
  status: TerminalStatus;
  /** Stays the same across retries: X-Sonar-Delivery and Idempotency-Key. */
  deliveryId: string;
}

/** The JSON body of a terminal callback (`{ok, event, job}`, docs/speech.md#terminal-callbacks). */
export interface CallbackEnvelope {
  ok: boolean;
  event: 'speech.job.completed' | 'speech.job.failed';
  job: {
    job_id: number;
    status: TerminalStatus;
    status_label: string;
    queue_channel: QueueChannel;
    queue_channel_label: string;
    source: string;
    model: string;
    language: string | null;
    job_url: string;
    share_url: string | null;
    transcript_text: string | null;
    /** The number of segments the transcript shows (the job's `segment_count`); null for a failed job. */
    segment_count: number | null;
    /** The completed analysis as text (summary, key points, action items, topics); null when there is none. */
    analysis_text: string | null;
    translations: CallbackTranslation[];
    share: { url: string } | null;
    speaker_aware_transcript: string | null;
    failure_error?: string | null;
  };
}

/** One entry of the callback's `translations[]`. */
export interface CallbackTranslation {
  language: string;
  status: string;
  text: string | null;
  analysis_text: string | null;
  error: string | null;
}

/** BullMQ job id of the one delivery for (job, cycle); BullMQ refuses ':' in custom ids. */
export const deliveryJobId = (jobId: number, cycle: number) => `${jobId}-${cycle}`;

/** Full-jitter exponential backoff: a random delay in [0, min(cap, base * 2^(n-1))]. */
export function fullJitterBackoff(attemptsMade: number, baseMs: number, capMs = MAX_BACKOFF_MS): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, attemptsMade - 1));
  return Math.floor(Math.random() * (ceiling + 1));
}

/** `v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`. */
export function signCallback(secret: string, timestamp: number | string, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/**
 * Verifies a callback as a receiver would: the X-Sonar-Signature header (one or more
 * comma-separated `v1=` values) against the raw body and X-Sonar-Timestamp, and the timestamp
 * within `toleranceSeconds` of now (replay protection).
 */
export function verifyCallbackSignature(
  secret: string,
  timestamp: string | number,
  body: string | Buffer,
  header: string | null | undefined,
  toleranceSeconds = 300,
  nowSeconds = Math.floor(Date.now() / 1000),
): boolean {
  const ts = typeof timestamp === 'number' ? timestamp : /^\d{1,15}$/.test(timestamp.trim()) ? Number(timestamp.trim()) : NaN;
  if (!Number.isFinite(ts) || Math.abs(nowSeconds - ts) > toleranceSeconds) return false;
  if (!header) return false;
  const expected = createHmac('sha256', secret)
    .update(`${ts}.`)
    .update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body)
    .digest();
  return header.split(',').some((part) => {
    const m = /^\s*v1=([0-9a-f]{64})\s*$/i.exec(part);
    if (!m) return false;
    const given = Buffer.from(m[1]!, 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

/**
 * The X-Sonar-Delivery / Idempotency-Key of the (job, cycle)'s callback: derived from what
 * PostgreSQL stores, not from the queue, so every retry carries the same value, also one queued
 * again after Redis lost the delivery, and on every coordinator. An HMAC under the installation's
 * JWT secret, shaped as a UUID: the same job and cycle of another installation get another id.
 */
export function callbackDeliveryId(secret: string, jobId: number, cycle: number): string {
  const h = createHmac('sha256', secret).update(`speech-callback:${jobId}:${cycle}`).digest('hex');
  // UUID version 8 (custom), RFC 9562 variant bits
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export const jobPageUrl = (config: Pick<Config, 'PUBLIC_BASE_URL'>, jobId: number) => `${config.PUBLIC_BASE_URL}/speech/jobs/${jobId}`;

/** One line, no stack, bounded: what goes into callback_error and the runtime log. */
function shortError(err: unknown, timeoutSeconds: number): string {
  if (err instanceof OutboundRefused) return `refused by the outbound policy: ${err.message}`.slice(0, MAX_ERROR_LENGTH);
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return `no response within ${timeoutSeconds} s`;
  const cause = e?.cause?.code ?? e?.cause?.message;
  const text = `${e?.message ?? String(err)}${cause ? ` (${cause})` : ''}`;
  return text.replace(/\s+/g, ' ').trim().slice(0, MAX_ERROR_LENGTH);
}

/** json / jsonb columns arrive parsed, or as text from some drivers' paths. */
const parsed = <T>(v: T | string | null): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : v);

interface JobRow {
  id: number;
  status: JobStatus;
  queue_channel: QueueChannel;
  source_label: string | null;
  source_filename: string | null;
  source_url: string | null;
  model: string;
  language: string | null;
  transcript_text: string | null;
  segment_count: number;
  failure_error: string | null;
  share_token: string | null;
  share_disabled_at: Date | string | null;
  callback_url: string | null;
  callback_status: string | null;
  callback_cycle: number;
  api_token_id: number | null;
  speaker_labels: SpeakerLabels | string | null;
  /** The current pass's segments (speaker-aware transcript), when any has a speaker. */
  segments: TranscriptSegment[] | string | null;
  analysis: AnalysisRecord | string | null;
  translations: Array<{ language: string; state: string; text: string | null; analysis: AnalysisRecord['result']; error: string | null }> | string | null;
}

/**
 * Terminal callbacks of token-API jobs. A terminal state enqueues one BullMQ delivery per
 * (job, notification cycle) — the deterministic job id makes that idempotent across coordinators —
 * and the worker POSTs the signed envelope through the SSRF-safe outbound policy, retrying with
 * exponential backoff and full jitter, and records every attempt on the job's callback fields.
 */
export class CallbackService {
  readonly queue: Queue<CallbackDelivery>;
  private worker: Worker<CallbackDelivery> | null = null;
  private readonly userAgent: string;
  private readonly outbound: OutboundPolicy;
  private readonly ownsOutbound: boolean;

  constructor(
    private readonly deps: { orm: Orm; repo: JobRepository; redis: Redis; config: Config; logger: Logger; prefix: string; outbound?: OutboundPolicy },
  ) {
    this.queue = new Queue<CallbackDelivery>(CALLBACK_QUEUE, { connection: deps.redis, prefix: deps.prefix });
    this.outbound = deps.outbound ?? new OutboundPolicy(deps.config.OUTBOUND_ALLOW_RANGES);
    this.ownsOutbound = !deps.outbound;
    this.userAgent = `sonar-callbacks/${readPlatformVersion()}`;
    if (isLocalBaseUrl(deps.config.PUBLIC_BASE_URL)) {
      deps.logger.warn(
        { publicBaseUrl: deps.config.PUBLIC_BASE_URL },
        'PUBLIC_BASE_URL is a local address: token-API jobs with a callback_url are refused (422) and no callback is sent, and links in reports will not work for anyone else; set PUBLIC_BASE_URL',
      );
    }
  }

  private get knex(): Knex {
    return this.deps.orm.em.getConnection().getKnex();
  }

  /** Starts the delivery worker (its own blocking Redis connection). */
  start(): this {
    const { redis, prefix, config, logger } = this.deps;
    this.worker = new Worker<CallbackDelivery>(CALLBACK_QUEUE, (job) => this.deliver(job), {
      connection: redis.duplicate({ maxRetriesPerRequest: null }),
      prefix,
      concurrency: 4,
      settings: { backoffStrategy: (attemptsMade: number) => fullJitterBackoff(attemptsMade, config.SPEECH_CALLBACK_BACKOFF_MS) },
    });
    this.worker.on('failed', (job, err) => {
      const final = err instanceof UnrecoverableError || (job !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1));
      if (job && final) logger.warn({ job: job.data.jobId, cycle: job.data.cycle, err: err.message }, 'speech callback not delivered');
    });
    this.worker.on('error', (err) => logger.error({ err }, 'speech callback worker error'));
    return this;
  }

  /** Queues the one delivery of this (job, cycle), if the job asked for a callback and the cycle is current. Returns the BullMQ id. */
  async enqueue(jobId: number, cycle: number, status: TerminalStatus): Promise<string | null> {
    const { rows } = await this.knex.raw<{ rows: Array<Pick<JobRow, 'queue_channel' | 'callback_url' | 'callback_status' | 'callback_cycle'>> }>(
      'select queue_channel, callback_url, callback_status, callback_cycle from speech_jobs where id = ?',
      [jobId],
    );
    const row = rows[0];
    if (!row || row.queue_channel !== 'api' || !row.callback_url) return null;
    // This cycle's callback already ended (delivered, or given up): one callback per cycle.
    if (row.callback_status === 'delivered' || row.callback_status === 'failed' || Number(row.callback_cycle) !== cycle) return null;
    const id = deliveryJobId(jobId, cycle);
    await this.queue.add(
      'deliver',
      { jobId, cycle, status, deliveryId: callbackDeliveryId(this.deps.config.JWT_SECRET, jobId, cycle) },
      {
        jobId: id,
        attempts: this.deps.config.SPEECH_CALLBACK_MAX_ATTEMPTS,
        backoff: { type: BACKOFF_TYPE },
        // Kept for a week so a second coordinator's add of the same (job, cycle) is a no-op.
        removeOnComplete: { age: 7 * 86400, count: 10_000 },
        removeOnFail: { age: 30 * 86400, count: 10_000 },
      },
    );
    return id;
  }

  private async loadJob(jobId: number): Promise<JobRow | null> {
    const { rows } = await this.knex.raw<{ rows: JobRow[] }>(
      `select id, status, queue_channel, source_label, source_filename, source_url, model, language, transcript_text,
              failure_error, share_token, share_disabled_at, callback_url, callback_status, callback_cycle, api_token_id, speaker_labels,
              ${SEGMENT_COUNT('j')} as segment_count,
              (select json_agg(json_build_object('start', s.start_seconds, 'end', s.end_seconds, 'text', s.text, 'speaker', s.speaker) order by s.seq)
                 from speech_segments s where s.job_id = j.id and s.pass = j.current_pass
                  and exists (select 1 from speech_segments x where x.job_id = j.id and x.pass = j.current_pass and x.speaker is not null)) as segments,
              j.analysis,
              (select json_agg(json_build_object('language', t.language, 'state', t.state, 'text', t.text, 'analysis', t.analysis, 'error', t.error) order by t.language)
                 from speech_translations t where t.job_id = j.id and t.pass = j.current_pass) as translations
         from speech_jobs j where id = ?`,
      [jobId],
    );
    return rows[0] ?? null;
  }

  private envelopeOf(row: JobRow, status: TerminalStatus): CallbackEnvelope {
    const { config } = this.deps;
    const completed = status === 'completed';
    const analysis = parsed<AnalysisRecord>(row.analysis);
    const shareUrl = completed && row.share_token && !row.share_disabled_at ? sharePageUrl(config.PUBLIC_BASE_URL, row.share_token) : null;
    const job: CallbackEnvelope['job'] = {
      job_id: row.id,
      status,
      status_label: JOB_STATUS_LABELS[status],
      queue_channel: row.queue_channel,
      queue_channel_label: QUEUE_CHANNEL_LABELS[row.queue_channel],
      source: row.source_label ?? row.source_filename ?? row.source_url ?? `Job ${row.id}`,
      model: row.model,
      language: row.language,
      job_url: jobPageUrl(config, row.id),
      share_url: shareUrl,
      transcript_text: completed ? (row.transcript_text ?? '') : null,
      segment_count: completed ? Number(row.segment_count) : null,
      analysis_text: completed && analysis?.state === 'completed' ? analysisText(analysis.result) : null,
      translations: completed
        ? (parsed<NonNullable<Exclude<JobRow['translations'], string>>>(row.translations) ?? []).map((t) => ({
            language: t.language,
            status: t.state,
            text: t.state === 'completed' ? t.text : null,
            analysis_text: t.state === 'completed' ? analysisText(t.analysis) : null,
            error: t.error,
          }))
        : [],
      share: shareUrl ? { url: shareUrl } : null,
      speaker_aware_transcript: completed
        ? speakerAwareTranscript(parsed<TranscriptSegment[]>(row.segments) ?? [], parsed<SpeakerLabels>(row.speaker_labels) ?? {})
        : null,
    };
    if (!completed) job.failure_error = row.failure_error ?? 'The job failed.';
    return { ok: completed, event: completed ? 'speech.job.completed' : 'speech.job.failed', job };
  }

  /**
   * The submitting token's callback secret. Tokens created before secrets existed have none: one
   * is generated and stored here; the integrator learns it only by rotating it
   * (POST /api/account/tokens/{id}/callback-secret).
   */
  private async secretFor(tokenId: number): Promise<string | null> {
    const fresh = randomBytes(32).toString('hex');
    const { rows } = await this.knex.raw<{ rows: Array<{ callback_secret: string; generated: boolean }> }>(
      `update personal_access_tokens set callback_secret = coalesce(callback_secret, ?)
        where id = ? returning callback_secret, (callback_secret = ?) as generated`,
      [fresh, tokenId, fresh],
    );
    const row = rows[0];
    if (!row) return null;
    if (row.generated) {
      this.deps.logger.warn(
        { tokenId },
        'personal token had no callback secret; one was generated to sign callbacks — the integrator must rotate it (POST /api/account/tokens/{id}/callback-secret) to learn it',
      );
    }
    return row.callback_secret;
  }

  private async record(
    jobId: number,
    cycle: number,
    outcome: { status: 'retrying' | 'delivered' | 'failed'; httpStatus: number | null; error: string | null },
  ) {
    // the job state owner writes the callback status (CALLBACK_TRANSITIONS.attempt)
    await this.deps.repo.recordCallback(jobId, cycle, outcome);
    if (outcome.status !== 'retrying') {
      const message =
        outcome.status === 'delivered' ? `Callback delivered (HTTP ${outcome.httpStatus}).` : `Callback not delivered: ${outcome.error ?? 'unknown error'}.`;
      await this.deps.repo
        .log(jobId, outcome.status === 'delivered' ? 'callback_delivered' : 'callback_failed', message, outcome.status === 'delivered' ? 'info' : 'warn')
        .catch(() => undefined);
    }
  }

  /** One delivery attempt (the BullMQ processor). Throws to retry; UnrecoverableError ends it. */
  private async deliver(job: Job<CallbackDelivery>): Promise<{ status: string; httpStatus?: number }> {
    const { jobId, cycle, status, deliveryId } = job.data;
    const { config } = this.deps;
    const row = await this.loadJob(jobId);
    // Deleted, or a newer cycle superseded this delivery: nothing to send.
    if (!row || Number(row.callback_cycle) !== cycle || !row.callback_url) return { status: 'skipped' };
    if (row.callback_status === 'delivered') return { status: 'already-delivered' };
    const maxAttempts = job.opts.attempts ?? 1;
    const lastAttempt = job.attemptsMade + 1 >= maxAttempts;

    // A callback never carries a local-only job_url: refused, final (waiting does not change the configuration).
    const baseProblem = callbackBaseUrlProblem(config.PUBLIC_BASE_URL);
    if (baseProblem) {
      const error = `not sent: ${baseProblem}`;
      await this.record(jobId, cycle, { status: 'failed', httpStatus: null, error });
      throw new UnrecoverableError(error);
    }

    const secret = row.api_token_id === null ? null : await this.secretFor(row.api_token_id);
    if (!secret) {
      const error = 'the submitting token no longer exists, so the callback cannot be signed';
      await this.record(jobId, cycle, { status: 'failed', httpStatus: null, error });
      throw new UnrecoverableError(error);
    }

    const body = JSON.stringify(this.envelopeOf(row, status));
    const timestamp = Math.floor(Date.now() / 1000);
    const event = status === 'completed' ? 'speech.job.completed' : 'speech.job.failed';
    let httpStatus: number | null = null;
    let error: string;
    try {
      const res = await this.outbound.fetch(row.callback_url, {
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/json',
          'user-agent': this.userAgent,
          'x-sonar-event': event,
          'x-sonar-delivery': deliveryId,
          'idempotency-key': deliveryId,
          'x-sonar-timestamp': String(timestamp),
          'x-sonar-signature': signCallback(secret, timestamp, body),
        },
        signal: AbortSignal.timeout(config.SPEECH_CALLBACK_TIMEOUT_SECONDS * 1000),
      });
      httpStatus = res.status;
      await res.body?.cancel().catch(() => undefined);
      if (res.status >= 200 && res.status < 300) {
        await this.record(jobId, cycle, { status: 'delivered', httpStatus, error: null });
        return { status: 'delivered', httpStatus };
      }
      error = `HTTP ${res.status}`;
    } catch (err) {
      error = shortError(err, config.SPEECH_CALLBACK_TIMEOUT_SECONDS);
      if (err instanceof OutboundRefused) {
        // The address will not become allowed by waiting: final, no retry.
        await this.record(jobId, cycle, { status: 'failed', httpStatus: null, error });
        throw new UnrecoverableError(error);
      }
    }
    await this.record(jobId, cycle, { status: lastAttempt ? 'failed' : 'retrying', httpStatus, error });
    throw new Error(error);
  }

  /** Waits for in-flight deliveries, then closes the queue. */
  async close() {
    await closeWorker(this.worker);
    await this.queue.close();
    if (this.ownsOutbound) await this.outbound.close();
  }
}
