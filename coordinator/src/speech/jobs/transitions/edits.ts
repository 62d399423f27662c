import type { Knex } from '@mikro-orm/postgresql';
import { sql } from '../../../db/sql.js';
import { isSpeakerKey, type SpeakerLabels } from '../speakers.js';
import { log } from './admin.js';
import { DELETE_PASS, INSERT_LABELLED } from './diarization.js';
import type { JobStore } from './store.js';

/**
 * Corrections of the current pass by the job's owner (speech_transcript_edits): a segment's text, a
 * segment or a run of its words moved to another speaker (existing or new), two speakers merged,
 * and undoing the latest correction. Each writes the pass's segments where everything downstream
 * reads them (downloads, share page, speaker counts, the speaker-aware transcript), stores what the
 * pass held before with the author and time, and marks the pass corrected (transcript_revised_at).
 * One transaction each, with the job row locked: a completed job whose speakers are not being
 * identified again. Refusals are EditRefusal (the service answers 404 or 422).
 */

/** A correction that cannot be made: `field` names what is wrong, `missing` that it does not exist (404). */
export class EditRefusal extends Error {
  constructor(
    readonly field: string,
    message: string,
    readonly missing = false,
  ) {
    super(message);
    this.name = 'EditRefusal';
  }
}

interface Word {
  start: number;
  end: number;
  text: string;
  speaker?: string | null;
}

/** A stored segment row of the pass, as an edit keeps it. */
interface SegRow {
  seq: number;
  start_seconds: number;
  end_seconds: number;
  text: string;
  speaker: string | null;
  words: Word[] | null;
  source_seq: number | null;
  source_text: string | null;
}

/** What an edit keeps of the pass before it: the rows it changed (same seqs), or the whole pass when it renumbered. */
interface Before {
  rows?: SegRow[];
  whole?: SegRow[];
  labels: SpeakerLabels;
}

export interface EditRow {
  id: number;
  pass: number;
  author_name: string;
  at_ms: number;
  kind: 'text' | 'speaker' | 'merge';
  summary: string;
  state: 'active' | 'undone' | 'superseded';
  undone_at_ms: number | null;
  undone_by: string | null;
}

/** LOCK_JOB — the job row, locked. Parameters: :id. Guard: none. Returns 0 or 1 rows. */
const LOCK_JOB = sql<{ id: number }, { status: string; pass: number; diarization_state: string | null; speaker_labels: SpeakerLabels | null }>(
  `select status, current_pass as pass, diarization_state, speaker_labels from speech_jobs where id = :id for update`,
);

/** PASS_ROWS — the segments of a pass in order. Parameters: :job, :pass. Guard: the caller holds the job row. */
const PASS_ROWS = sql<{ job: number; pass: number }, SegRow>(
  `select seq, start_seconds, end_seconds, text, speaker, words, source_seq, source_text
     from speech_segments where job_id = :job and pass = :pass order by seq`,
);

/** UPDATE_ROW — one segment's text, speaker, times and words. Parameters: :job, :pass, :seq and the values. */
const UPDATE_ROW = sql<{ job: number; pass: number; seq: number; text: string; speaker: string | null; words: string | null; start: number; end: number }>(
  `update speech_segments set text = :text, speaker = :speaker, words = :words::jsonb, start_seconds = :start, end_seconds = :end
    where job_id = :job and pass = :pass and seq = :seq`,
);

/** INSERT_EDIT — the edit's row. Returns its id. */
const INSERT_EDIT = sql<{ job: number; pass: number; author: number; name: string; kind: string; summary: string; before: string }, { id: number }>(
  `insert into speech_transcript_edits (job_id, pass, author_id, author_name, kind, summary, before)
   values (:job, :pass, :author, :name, :kind, :summary, :before::jsonb) returning id`,
);

/**
 * REVISED — after an edit or an undo: the stored transcript text and the speaker count from the
 * pass's segments (as the completion computes them), the speaker names, and the pass marked corrected.
 */
const REVISED = sql<{ id: number; labels: string }>(
  `update speech_jobs j set
     transcript_text = coalesce((select string_agg(btrim(s.text), ' ' order by s.seq) filter (where btrim(s.text) <> '')
                                   from speech_segments s where s.job_id = j.id and s.pass = j.current_pass), ''),
     diarization_speaker_count = case when j.diarization_state = 'completed'
       then (select count(distinct s.speaker)::int from speech_segments s
              where s.job_id = j.id and s.pass = j.current_pass and s.speaker is not null and btrim(s.text) <> '')
       else j.diarization_speaker_count end,
     speaker_labels = :labels::jsonb,
     transcript_revised_at = now(), transcript_revised_pass = j.current_pass, updated_at = now()
   where j.id = :id`,
);

/** LATEST_ACTIVE — the newest active edit of a pass. */
const LATEST_ACTIVE = sql<{ job: number; pass: number }, { id: number; before: Before; summary: string }>(
  `select id, before, summary from speech_transcript_edits where job_id = :job and pass = :pass and state = 'active' order by id desc limit 1`,
);

const MARK_UNDONE = sql<{ id: number; by: string }>(`update speech_transcript_edits set state = 'undone', undone_at = now(), undone_by = :by where id = :id`);

/** EDITS_OF — a job's edits, newest first. Parameters: :job. */
const EDITS_OF = sql<{ job: number }, EditRow>(
  `select id, pass, author_name, (extract(epoch from at) * 1000)::float8 as at_ms, kind, summary, state,
          (extract(epoch from undone_at) * 1000)::float8 as undone_at_ms, undone_by
     from speech_transcript_edits where job_id = :job order by id desc limit 500`,
);

/**
 * SUPERSEDE — a diarization rerun starts the pass's speakers afresh from the engine's transcript:
 * its active corrections stay in the history as `superseded` and the pass is no longer marked
 * corrected. Parameters: :job. Returns the edits it superseded.
 */
const SUPERSEDE = sql<{ job: number }, { id: number }>(
  `with e as (update speech_transcript_edits t set state = 'superseded'
                from speech_jobs j where j.id = :job and t.job_id = j.id and t.pass = j.current_pass and t.state = 'active' returning t.id),
        j as (update speech_jobs set transcript_revised_at = null, transcript_revised_pass = null where id = :job and exists (select 1 from e))
   select id from e`,
);

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

function rowsOut(rows: readonly SegRow[]) {
  return {
    seqs: rows.map((r) => r.seq),
    starts: rows.map((r) => r.start_seconds),
    ends: rows.map((r) => r.end_seconds),
    texts: rows.map((r) => r.text),
    speakers: rows.map((r) => r.speaker),
    words: rows.map((r) => (r.words ? JSON.stringify(r.words) : null)),
    sources: rows.map((r) => r.source_seq),
    sourceTexts: rows.map((r) => r.source_text),
  };
}

async function writeWhole(trx: Knex.Transaction, job: number, pass: number, rows: readonly SegRow[]) {
  await DELETE_PASS.rows(trx, { job, pass });
  if (rows.length) await INSERT_LABELLED.rows(trx, { job, pass, ...rowsOut(rows) });
}

async function writeRow(trx: Knex.Transaction, job: number, pass: number, r: SegRow) {
  await UPDATE_ROW.rows(trx, {
    job,
    pass,
    seq: r.seq,
    text: r.text,
    speaker: r.speaker,
    words: r.words ? JSON.stringify(r.words) : null,
    start: r.start_seconds,
    end: r.end_seconds,
  });
}

interface Ctx {
  trx: Knex.Transaction;
  pass: number;
  rows: SegRow[];
  labels: SpeakerLabels;
  diarized: boolean;
}

/** Runs an edit in a transaction with the job locked; the rules every edit shares. */
async function editing(
  store: JobStore,
  jobId: number,
  author: { id: number; name: string },
  kind: 'text' | 'speaker' | 'merge',
  work: (ctx: Ctx) => Promise<{ before: Before; labels: SpeakerLabels; summary: string }>,
): Promise<number> {
  const id = await store.knex.transaction(async (trx) => {
    const job = await LOCK_JOB.first(trx, { id: jobId });
    if (!job) throw new EditRefusal('job', 'Job not found.', true);
    if (job.status !== 'completed') throw new EditRefusal('status', `only a completed transcript can be corrected; this job is ${job.status}`);
    if (job.diarization_state === 'pending' || job.diarization_state === 'running')
      throw new EditRefusal('diarization', 'speakers are being identified again; correct the transcript once that has finished');
    const rows = await PASS_ROWS.rows(trx, { job: jobId, pass: job.pass });
    const labels = job.speaker_labels ?? {};
    const done = await work({ trx, pass: job.pass, rows, labels, diarized: job.diarization_state === 'completed' });
    await REVISED.rows(trx, { id: jobId, labels: JSON.stringify(done.labels) });
    const edit = await INSERT_EDIT.first(trx, {
      job: jobId,
      pass: job.pass,
      author: author.id,
      name: author.name,
      kind,
      summary: done.summary,
      before: JSON.stringify(done.before),
    });
    return { id: edit!.id, summary: done.summary };
  });
  await log(store, jobId, 'transcript_edited', `${id.summary} (by ${author.name}).`);
  store.sink.changed(jobId, 'transcript');
  return id.id;
}

const findRow = (rows: readonly SegRow[], seq: number) => {
  const row = rows.find((r) => r.seq === seq);
  if (!row) throw new EditRefusal('seq', `the transcript has no segment ${seq}`, true);
  return row;
};

/** The words of a new text when it has as many words as the old: the old times with the new spellings; else none. */
function respelled(words: Word[] | null, text: string): Word[] | null {
  if (!words?.length) return null;
  const parts = squash(text).split(' ');
  if (parts.length !== words.length) return null;
  return words.map((w, i) => ({ ...w, text: parts[i]! }));
}

export function editText(store: JobStore, jobId: number, author: { id: number; name: string }, seq: number, text: string): Promise<number> {
  return editing(store, jobId, author, 'text', async ({ trx, pass, rows, labels }) => {
    const row = findRow(rows, seq);
    const clean = squash(text);
    if (!clean) throw new EditRefusal('text', 'the text may not be empty');
    await writeRow(trx, jobId, pass, { ...row, text: clean, words: respelled(row.words, clean) });
    return { before: { rows: [row], labels }, labels, summary: `Segment ${seq} corrected` };
  });
}

/** The key of a speaker the pass does not have yet: one more than the highest in use or named. */
function newSpeakerKey(rows: readonly SegRow[], labels: SpeakerLabels): string {
  const numbers = [...rows.map((r) => r.speaker), ...Object.keys(labels)]
    .map((k) => /^S(\d+)$/.exec(k ?? '')?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number);
  return `S${Math.max(0, ...numbers) + 1}`;
}

export function moveToSpeaker(
  store: JobStore,
  jobId: number,
  author: { id: number; name: string },
  change: { seq: number; speaker: string; name?: string | undefined; fromWord?: number | undefined; toWord?: number | undefined },
): Promise<number> {
  return editing(store, jobId, author, 'speaker', async ({ trx, pass, rows, labels }) => {
    const row = findRow(rows, change.seq);
    let key = change.speaker;
    const nextLabels = { ...labels };
    if (key === 'new') {
      key = newSpeakerKey(rows, labels);
      if (change.name?.trim()) nextLabels[key] = change.name.trim();
    } else if (!isSpeakerKey(key) || !(rows.some((r) => r.speaker === key) || key in labels)) {
      throw new EditRefusal('speaker', `the transcript has no speaker ${key}; name one of its speakers, or "new"`);
    }
    const words = row.words ?? [];
    const whole = change.fromWord === undefined && change.toWord === undefined;
    const from = change.fromWord ?? 0;
    const to = change.toWord ?? words.length - 1;
    if (whole || (from === 0 && to === words.length - 1)) {
      if (row.speaker === key) throw new EditRefusal('speaker', `segment ${row.seq} is already ${key}'s`);
      await writeRow(trx, jobId, pass, { ...row, speaker: key, words: row.words?.map((w) => ({ ...w, speaker: key })) ?? null });
      return { before: { rows: [row], labels }, labels: nextLabels, summary: `Segment ${row.seq} moved to ${key}` };
    }
    if (!words.length) throw new EditRefusal('from_word', `segment ${row.seq} has no word times; move the whole segment`);
    if (!(from >= 0 && to >= from && to < words.length))
      throw new EditRefusal('from_word', `words ${from}–${to} are not within the segment's ${words.length} words`);
    // The run becomes a segment of its own (and what is before and after it, segments of the old speaker), renumbering those after.
    const source = { source_seq: row.source_seq ?? row.seq, source_text: row.source_text ?? row.text };
    const piece = (ws: Word[], speaker: string | null, first: boolean, last: boolean): SegRow => ({
      seq: 0,
      start_seconds: first ? row.start_seconds : ws[0]!.start,
      end_seconds: last ? row.end_seconds : ws.at(-1)!.end,
      text: squash(ws.map((w) => w.text).join(' ')),
      speaker,
      words: ws.map((w) => ({ ...w, speaker })),
      ...source,
    });
    const pieces = [
      ...(from > 0 ? [piece(words.slice(0, from), row.speaker, true, false)] : []),
      piece(words.slice(from, to + 1), key, from === 0, to === words.length - 1),
      ...(to < words.length - 1 ? [piece(words.slice(to + 1), row.speaker, false, true)] : []),
    ];
    const next: SegRow[] = [];
    for (const r of rows) {
      if (r.seq === row.seq) next.push(...pieces.map((p, i) => ({ ...p, seq: row.seq + i })));
      else next.push({ ...r, seq: r.seq > row.seq ? r.seq + pieces.length - 1 : r.seq });
    }
    await writeWhole(trx, jobId, pass, next);
    return { before: { whole: rows, labels }, labels: nextLabels, summary: `Words ${from + 1}–${to + 1} of segment ${row.seq} moved to ${key}` };
  });
}

export function mergeSpeakers(store: JobStore, jobId: number, author: { id: number; name: string }, from: string, into: string): Promise<number> {
  return editing(store, jobId, author, 'merge', async ({ trx, pass, rows, labels }) => {
    const present = new Set(rows.map((r) => r.speaker));
    if (!present.has(from)) throw new EditRefusal('from', `the transcript has no speaker ${from}`);
    if (!present.has(into)) throw new EditRefusal('into', `the transcript has no speaker ${into}`);
    if (from === into) throw new EditRefusal('into', 'a speaker cannot be merged into itself');
    const changed = rows.filter((r) => r.speaker === from);
    for (const r of changed) await writeRow(trx, jobId, pass, { ...r, speaker: into, words: r.words?.map((w) => ({ ...w, speaker: into })) ?? null });
    const nextLabels = Object.fromEntries(Object.entries(labels).filter(([key]) => key !== from));
    return { before: { rows: changed, labels }, labels: nextLabels, summary: `Speaker ${from} merged into ${into}` };
  });
}

/** Undoes the newest active correction of the current pass (corrections come off in the order they went on). Returns its id. */
export async function undoLatest(store: JobStore, jobId: number, by: string, expected?: number): Promise<number> {
  const undone = await store.knex.transaction(async (trx) => {
    const job = await LOCK_JOB.first(trx, { id: jobId });
    if (!job) throw new EditRefusal('job', 'Job not found.', true);
    const edit = await LATEST_ACTIVE.first(trx, { job: jobId, pass: job.pass });
    if (!edit) throw new EditRefusal('edit', 'the transcript has no correction to undo');
    if (expected !== undefined && edit.id !== expected)
      throw new EditRefusal('edit', `correction ${expected} is not the latest; undo ${edit.id} (“${edit.summary}”) first`);
    if (edit.before.whole) await writeWhole(trx, jobId, job.pass, edit.before.whole);
    for (const r of edit.before.rows ?? []) await writeRow(trx, jobId, job.pass, r);
    await REVISED.rows(trx, { id: jobId, labels: JSON.stringify(edit.before.labels) });
    await MARK_UNDONE.rows(trx, { id: edit.id, by });
    return edit;
  });
  await log(store, jobId, 'transcript_edit_undone', `Undone: ${undone.summary} (by ${by}).`);
  store.sink.changed(jobId, 'transcript');
  return undone.id;
}

export const listEdits = (store: JobStore, jobId: number) => EDITS_OF.rows(store.knex, { job: jobId });

/** Before a diarization rerun: the pass's active corrections are kept as `superseded`, never carried into the new speakers silently. */
export async function supersedeEdits(store: JobStore, jobId: number, by: string): Promise<number> {
  const rows = await SUPERSEDE.rows(store.knex, { job: jobId });
  if (rows.length)
    await log(
      store,
      jobId,
      'transcript_edits_superseded',
      `${rows.length} ${rows.length === 1 ? 'correction is' : 'corrections are'} kept in the history: the new speaker identification (requested by ${by}) starts from the engine's transcript.`,
    );
  return rows.length;
}
