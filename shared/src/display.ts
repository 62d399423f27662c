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
  'player',
  'facts',
  'liveness',
  'worker',
  'transcript',
  'reading',
  'transcript-notes',
  'edits',
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
/**
 * The cards a live page fetches again on every event: all but the streamed transcript and
 * `reading` (the transcript's text, fetched only after a correction of it).
 */
export const SWAPPABLE_JOB_PAGE_CARDS = JOB_PAGE_CARDS.filter(
  (c): c is Exclude<JobPageCard, 'transcript' | 'reading'> => c !== 'transcript' && c !== 'reading',
);

// ---- the reading view of a transcript (job page, share page) --------------------------------

/** How many speaker colours the stylesheet defines (`.spk-1` … `.spk-8`, the waveform's regions too). */
export const SPEAKER_COLOURS = 8;

/**
 * The colour class of a speaker key (`S1` → `spk-1`, `S9` → `spk-1`): the same key has the same
 * colour in every view of a job (transcript, speakers card, waveform, share page). Keys of other
 * diarizers (`SPEAKER_00`, counted from 0) go by their number; any other key by a hash of it.
 * `spk-0` is "no speaker".
 */
export function speakerColourClass(key: string | null | undefined): string {
  if (!key) return 'spk-0';
  const ours = /^S(\d+)$/.exec(key);
  const theirs = /(\d+)$/.exec(key);
  let n: number;
  if (ours) n = Number(ours[1]) - 1;
  else if (theirs) n = Number(theirs[1]);
  else {
    n = 7;
    for (let i = 0; i < key.length; i++) n = (n * 31 + key.charCodeAt(i)) >>> 0;
  }
  return `spk-${(Math.max(0, n) % SPEAKER_COLOURS) + 1}`;
}

/** The name a speaker key reads as when nobody named it: `S2` → `Speaker 2`. */
export function defaultSpeakerName(key: string): string {
  const n = /^S(\d+)$/.exec(key);
  return n ? `Speaker ${n[1]}` : key;
}

/** What the reading view knows about the turn a segment may join. */
export interface TurnSoFar {
  speaker: string | null;
  /** Where the turn's last segment ended (seconds). */
  end: number;
  /** Characters of text in the turn so far. */
  length: number;
  /** Whether the turn's text ends a sentence. */
  sentenceEnded: boolean;
}

/**
 * Turns per chunk of the reading view (`<div class="chunk">`): the browser skips the rendering of
 * chunks off screen (`content-visibility: auto`), and watching a few dozen chunks costs far less
 * than watching every paragraph of a long transcript while it scrolls.
 */
export const TURNS_PER_CHUNK = 8;

/** A pause this long (seconds) starts a new paragraph even within one speaker's turn. */
export const TURN_PAUSE_SECONDS = 2.5;
/** A paragraph this long (characters) ends at the next sentence end. */
export const TURN_MAX_CHARS = 600;

/**
 * Whether a segment starts a new paragraph of the reading view: a change of speaker, a pause of
 * 2.5 s or more, or a long paragraph whose last sentence ended. The server's render and the live
 * page's appends both ask this, so a page that grew live reads as a fresh load.
 */
export function startsNewTurn(turn: TurnSoFar | null, segment: { speaker: string | null; start: number }): boolean {
  if (!turn) return true;
  if (turn.speaker !== segment.speaker) return true;
  if (segment.start - turn.end >= TURN_PAUSE_SECONDS) return true;
  return turn.length >= TURN_MAX_CHARS && turn.sentenceEnded;
}

/** Whether text ends a sentence (a full stop, question or exclamation mark, an ellipsis, maybe a closing quote). */
export const endsSentence = (text: string): boolean => /[.!?…]["'”’)\]]?$/.test(text.trimEnd());

/** A media position for a turn's timestamp: `m:ss` or `h:mm:ss`. */
export function turnClock(seconds: number): string {
  const total = Math.max(0, Math.floor(seconds));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}
