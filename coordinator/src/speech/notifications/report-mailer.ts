import type { Knex } from '@mikro-orm/postgresql';
import { JOB_STATUS_LABELS, type DiarizationState, type JobStatus } from '@sonar/shared';
import { Queue, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Transporter } from 'nodemailer';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import { html } from '../../http/html.js';
import { humanDuration } from '../jobs/liveness.js';
import { shareUrl as sharePageUrl } from '../shares/share-links.js';
import { deliveryJobId, jobPageUrl, type TerminalStatus } from './callback-service.js';
import type { AnalysisRecord, AutoTitleRecord } from '../jobs/entities.js';
import { closeWorker } from '../../queue/workers.js';
import { SEGMENT_COUNT, SHOWN_SEGMENT } from '../jobs/transitions/segment-count.js';

export const REPORT_QUEUE = 'speech-reports';
const REPORT_ATTEMPTS = 6;
const REPORT_BACKOFF_MS = 30_000;

export interface ReportDelivery {
  jobId: number;
  cycle: number;
  status: TerminalStatus;
}

/** The diarization summary of a completion report (whether requested, state, engine, speaker and labelled-segment counts). */
export interface DiarizationSummary {
  requested: boolean;
  state: DiarizationState;
  provider: string;
  speakerCount: number;
  labelledSegmentCount: number;
  note: string | null;
}

export interface ReportContent {
  to: string;
  subject: string;
  text: string;
  html: string;
}

interface ReportRow {
  id: number;
  status: JobStatus;
  source_label: string | null;
  source_filename: string | null;
  source_url: string | null;
  source_duration_seconds: number | null;
  model: string;
  failure_error: string | null;
  share_token: string | null;
  share_disabled_at: Date | string | null;
  diarization_requested: boolean;
  diarization_state: DiarizationState;
  current_pass: number;
  callback_cycle: number;
  report_sent_at: Date | string | null;
  email: string | null;
  speakers: string | number;
  labelled: string | number;
  /** The one segment count (transitions/segment-count.ts). */
  segments: string | number;
  diarization_note: string | null;
  diarization_engine: string | null;
  diarization_error: string | null;
  analysis: AnalysisRecord | string | null;
  auto_title: AutoTitleRecord | string | null;
  translations: string | null;
}

/** Text a report may show: one line, no control characters, bounded. */
export function safeText(value: string | null | undefined, max = 500): string | null {
  if (!value) return null;
  const clean = value
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (!clean) return null;
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}

function diarizationNote(state: DiarizationState, requested: boolean, error: string | null, logged: string | null): string | null {
  if (!requested || state === 'skipped') return 'Speaker labels were turned off for this job.';
  const reason = safeText(error, 300);
  if (state === 'unavailable') return `No speaker labels were produced: ${reason ?? 'no worker with a diarizer ran this job'}.`;
  if (state === 'failed') return `Speaker diarization failed (the transcript is not affected)${reason ? `: ${reason}` : '.'}`;
  const fromLog = safeText(logged, 300);
  if (fromLog) return fromLog;
  if (state === 'pending' || state === 'running') return 'Speaker diarization has not finished yet.';
  return null;
}

const parsedJson = <T>(v: T | string | null): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : v);

/** The AI part of a report: which provider, and the state of the analysis, translations and title. */
function aiFacts(row: ReportRow, providerLabel: string | null): Array<[string, string]> {
  const analysis = parsedJson<AnalysisRecord>(row.analysis);
  const title = parsedJson<AutoTitleRecord>(row.auto_title);
  if (!analysis && !title && !row.translations) return [];
  const provider = analysis?.provider && analysis.provider !== 'none' ? analysis.provider : providerLabel;
  const facts: Array<[string, string]> = [['AI provider', provider ? `OpenAI-compatible: ${provider}` : 'not configured']];
  if (analysis) {
    facts.push(['Analysis', analysis.state === 'completed' || !analysis.error ? analysis.state : `${analysis.state}: ${safeText(analysis.error, 300)}`]);
    if (analysis.state === 'completed' && analysis.result) facts.push(['Summary', safeText(analysis.result.summary, 1000) ?? '']);
  }
  if (row.translations) facts.push(['Translations', row.translations]);
  if (title)
    facts.push(['Generated title', title.state === 'completed' ? `${safeText(title.title, 200)}${title.applied ? '' : ' (not applied)'}` : title.state]);
  return facts;
}

/** Builds the report mail of one job (text and simple HTML). `providerLabel`: the configured AI provider ("model at host"), if any. */
export function buildReport(
  config: Pick<Config, 'PUBLIC_BASE_URL'>,
  row: ReportRow,
  status: TerminalStatus,
  providerLabel: string | null = null,
): ReportContent {
  const title = safeText(row.source_label ?? row.source_filename ?? row.source_url, 200) ?? `Job ${row.id}`;
  const jobUrl = jobPageUrl(config, row.id);
  const shareUrl = row.share_token && !row.share_disabled_at ? sharePageUrl(config.PUBLIC_BASE_URL, row.share_token) : null;
  const failed = status === 'failed';
  const d: DiarizationSummary = {
    requested: row.diarization_requested,
    state: row.diarization_state,
    provider: row.diarization_engine ?? 'none',
    speakerCount: Number(row.speakers),
    labelledSegmentCount: Number(row.labelled),
    note: diarizationNote(row.diarization_state, row.diarization_requested, row.diarization_error, row.diarization_note),
  };
  const facts: Array<[string, string]> = [
    ['Status', JOB_STATUS_LABELS[status]],
    ['Job page', jobUrl],
    ...(shareUrl ? ([['Shared transcript', shareUrl]] as Array<[string, string]>) : []),
    ['Duration', humanDuration(row.source_duration_seconds) ?? 'unknown'],
    ['Model', row.model],
    ...(failed ? [] : ([['Segments', String(Number(row.segments))]] as Array<[string, string]>)),
    ...(failed ? ([['Failure reason', safeText(row.failure_error) ?? 'not recorded']] as Array<[string, string]>) : []),
  ];
  const diarization: Array<[string, string]> = [
    ['Diarization', d.requested ? 'requested' : 'disabled'],
    ['Diarization status', d.state],
    ['Diarization provider', d.provider],
    ['Detected speakers', String(d.speakerCount)],
    ['Labelled segments', String(d.labelledSegmentCount)],
    ...(d.note ? ([['Diarization note', d.note]] as Array<[string, string]>) : []),
  ];
  const ai = failed ? [] : aiFacts(row, providerLabel);
  const heading = `Transcription ${failed ? 'failed' : 'completed'}: ${title}`;
  const text = [
    heading,
    '',
    ...facts.map(([k, v]) => `${k}: ${v}`),
    '',
    'Speaker labels',
    ...diarization.map(([k, v]) => `${k}: ${v}`),
    ...(ai.length ? ['', 'Analysis and translations', ...ai.map(([k, v]) => `${k}: ${v}`)] : []),
    '',
    `Open the job: ${jobUrl}`,
    '',
  ].join('\n');
  const rows = (list: Array<[string, string]>) =>
    list.map(
      ([k, v]) => html`<tr><th align="left" style="padding-right:12px">${k}</th><td>${/^https?:\/\//.test(v) ? html`<a href="${v}">${v}</a>` : v}</td></tr>`,
    );
  const body = html`<!doctype html><html><body style="font-family:sans-serif">
<h2>${heading}</h2>
<table>${rows(facts)}</table>
<h3>Speaker labels</h3>
<table>${rows(diarization)}</table>
${ai.length ? html`<h3>Analysis and translations</h3><table>${rows(ai)}</table>` : ''}
<p><a href="${jobUrl}">Open the job</a></p>
</body></html>`;
  return { to: row.email ?? '', subject: heading, text, html: body.toString() };
}

/**
 * Completion reports: when any job reaches completed or failed and its owner has an e-mail
 * address, one report per (job, notification cycle) goes out over SMTP through the BullMQ queue
 * speech-reports (retried with backoff); report_sent_at records the sending.
 */
export class ReportMailer {
  readonly queue: Queue<ReportDelivery>;
  private worker: Worker<ReportDelivery> | null = null;
  /** nodemailer is loaded only when mail is configured (this class exists only then). */
  private readonly transport: Promise<Transporter>;
  private readonly from: string;

  constructor(
    private readonly deps: { orm: Orm; redis: Redis; config: Config & { SMTP_URL: string }; logger: Logger; prefix: string; providerLabel?: string | null },
  ) {
    this.queue = new Queue<ReportDelivery>(REPORT_QUEUE, { connection: deps.redis, prefix: deps.prefix });
    this.transport = import('nodemailer').then((m) => m.default.createTransport(deps.config.SMTP_URL));
    const host = new URL(deps.config.PUBLIC_BASE_URL).hostname || 'localhost';
    this.from = deps.config.MAIL_FROM ?? `Sonar <no-reply@${host}>`;
  }

  private get knex(): Knex {
    return this.deps.orm.em.getConnection().getKnex();
  }

  start(): this {
    const { redis, prefix, logger } = this.deps;
    this.worker = new Worker<ReportDelivery>(REPORT_QUEUE, (job) => this.send(job), {
      connection: redis.duplicate({ maxRetriesPerRequest: null }),
      prefix,
      concurrency: 2,
    });
    this.worker.on('failed', (job, err) => logger.warn({ job: job?.data.jobId, attempt: job?.attemptsMade, err: err.message }, 'completion report not sent'));
    this.worker.on('error', (err) => logger.error({ err }, 'completion report worker error'));
    return this;
  }

  /** Queues the one report of this (job, cycle) when the owner has an address and the cycle is current. Returns the BullMQ id. */
  async enqueue(jobId: number, cycle: number, status: TerminalStatus): Promise<string | null> {
    const { rows } = await this.knex.raw<{ rows: Array<{ email: string | null; callback_cycle: number; report_sent_at: unknown }> }>(
      'select u.email, j.callback_cycle, j.report_sent_at from speech_jobs j join users u on u.id = j.owner_id where j.id = ?',
      [jobId],
    );
    const row = rows[0];
    if (!row || !row.email?.trim() || row.report_sent_at || Number(row.callback_cycle) !== cycle) return null;
    const id = deliveryJobId(jobId, cycle);
    await this.queue.add(
      'report',
      { jobId, cycle, status },
      {
        jobId: id,
        attempts: REPORT_ATTEMPTS,
        backoff: { type: 'exponential', delay: REPORT_BACKOFF_MS, jitter: 0.5 },
        removeOnComplete: { age: 7 * 86400, count: 10_000 },
        removeOnFail: { age: 30 * 86400, count: 10_000 },
      },
    );
    return id;
  }

  private async loadRow(jobId: number): Promise<ReportRow | null> {
    const { rows } = await this.knex.raw<{ rows: ReportRow[] }>(
      `select j.id, j.status, j.source_label, j.source_filename, j.source_url, j.source_duration_seconds, j.model, j.failure_error,
              j.share_token, j.share_disabled_at, j.diarization_requested, j.diarization_state, j.diarization_engine, j.diarization_error, j.current_pass, j.callback_cycle,
              j.report_sent_at, u.email,
              (select count(distinct s.speaker) from speech_segments s where s.job_id = j.id and s.pass = j.current_pass and s.speaker is not null) as speakers,
              (select count(*) from speech_segments s where s.job_id = j.id and s.pass = j.current_pass and s.speaker is not null and ${SHOWN_SEGMENT}) as labelled,
              ${SEGMENT_COUNT('j')} as segments,
              (select e.message from speech_job_events e where e.job_id = j.id and e.event like 'diarization%' and e.level in ('warn', 'error')
                order by e.at desc, e.id desc limit 1) as diarization_note,
              j.analysis, j.auto_title,
              (select string_agg(t.language || ' ' || t.state || coalesce(' (' || left(t.error, 200) || ')', ''), ', ' order by t.language)
                 from speech_translations t where t.job_id = j.id and t.pass = j.current_pass) as translations
         from speech_jobs j join users u on u.id = j.owner_id where j.id = ?`,
      [jobId],
    );
    return rows[0] ?? null;
  }

  /** The report of a job as it would be sent now (null when it has no owner e-mail). */
  async preview(jobId: number, status: TerminalStatus): Promise<ReportContent | null> {
    const row = await this.loadRow(jobId);
    return row?.email ? buildReport(this.deps.config, row, status, this.deps.providerLabel ?? null) : null;
  }

  private async send(job: Job<ReportDelivery>): Promise<{ status: string }> {
    const { jobId, cycle, status } = job.data;
    const row = await this.loadRow(jobId);
    if (!row || !row.email?.trim() || Number(row.callback_cycle) !== cycle) return { status: 'skipped' };
    if (row.report_sent_at) return { status: 'already-sent' };
    const report = buildReport(this.deps.config, row, status, this.deps.providerLabel ?? null);
    await (await this.transport).sendMail({ from: this.from, to: row.email, subject: report.subject, text: report.text, html: report.html });
    await this.knex.raw('update speech_jobs set report_sent_at = now() where id = ? and callback_cycle = ? and report_sent_at is null', [jobId, cycle]);
    return { status: 'sent' };
  }

  async close() {
    await closeWorker(this.worker);
    await this.queue.close();
    (await this.transport).close();
  }
}
