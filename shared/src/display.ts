/**
 * Display helpers shared by the server-rendered pages and the browser modules of the web console
 * (imported there as `@sonar/shared/display`, so this file must stay free of Node APIs).
 */

/** Every job-detail and runtime-log time is shown in this zone, on the server and in the browser. */
export const DISPLAY_TIME_ZONE = 'Europe/Stockholm';

// sv-SE gives ISO-like "2026-11-24 13:05:07"; the zone abbreviation (CET/CEST) says which offset applies.
const dateTime = new Intl.DateTimeFormat('sv-SE', {
  timeZone: DISPLAY_TIME_ZONE,
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  timeZoneName: 'short',
});
const timeOnly = new Intl.DateTimeFormat('sv-SE', { timeZone: DISPLAY_TIME_ZONE, hour: '2-digit', minute: '2-digit', second: '2-digit' });

const asDate = (value: Date | string | number) => (value instanceof Date ? value : new Date(value));

/** "2026-11-24 13:05:07 CET": a timestamp in Europe/Stockholm; "" for a missing or invalid value. */
export function formatStockholm(value: Date | string | number | null | undefined): string {
  if (value === null || value === undefined) return '';
  const d = asDate(value);
  return Number.isNaN(d.getTime()) ? '' : dateTime.format(d);
}

/** "13:05:07": the time of day in Europe/Stockholm. */
export function formatStockholmTime(value: Date | string | number): string {
  const d = asDate(value);
  return Number.isNaN(d.getTime()) ? '' : timeOnly.format(d);
}

/** A media position as mm:ss.s (the job page's segment times). */
export function mediaClock(seconds: number): string {
  const m = Math.floor(seconds / 60);
  return `${String(m).padStart(2, '0')}:${(seconds - m * 60).toFixed(1).padStart(4, '0')}`;
}

/** Heartbeat silence after which the job page warns that the runner has likely stopped (separate from lease recovery). */
export const UNRESPONSIVE_WARNING_SECONDS = 90;

/** The worker card refreshes this often while the tab is visible. */
export const WORKER_CARD_REFRESH_MS = 15_000;

/**
 * When a processing job should finish, from completed-segment timing: the audio covered by the
 * latest completed segment (`position`) took `progressAt - startedAt` of wall time, and the rest of
 * the recording is assumed to go at that pace. Null without a duration, progress or a positive pace.
 */
export function estimateFinish(input: {
  durationSeconds: number | null;
  positionSeconds: number;
  startedAt: Date | string | null;
  progressAt: Date | string | null;
}): Date | null {
  const { durationSeconds: duration, positionSeconds: position } = input;
  if (!duration || duration <= 0 || position <= 0 || !input.startedAt || !input.progressAt) return null;
  const started = asDate(input.startedAt).getTime();
  const progressed = asDate(input.progressAt).getTime();
  const spent = progressed - started;
  if (!(spent > 0)) return null;
  const remaining = Math.max(0, duration - position);
  return new Date(progressed + (remaining * spent) / position);
}

/**
 * The cards of the job page by slot name, in page order: the server renders them (full page and
 * GET /speech/jobs/{id}/cards) and the browser asks for them by these names. `transcript` holds the
 * streamed segment list and is never swapped.
 */
export const JOB_PAGE_CARDS = [
  'summary',
  'liveness',
  'worker',
  'transcript',
  'transcript-notes',
  'downloads',
  'actions',
  'target',
  'speakers',
  'analysis',
  'translations',
  'metadata',
  'retranscription',
  'revisions',
  'runtime-log',
] as const;
export type JobPageCard = (typeof JOB_PAGE_CARDS)[number];
/** The cards a live page fetches again: all but the streamed transcript. */
export const SWAPPABLE_JOB_PAGE_CARDS = JOB_PAGE_CARDS.filter((c): c is Exclude<JobPageCard, 'transcript'> => c !== 'transcript');
