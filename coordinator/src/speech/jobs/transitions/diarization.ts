import type { DiarizationState, LeaseRefMsg } from '@sonar/shared';
import { sql } from '../../../db/sql.js';
import { AI_TRANSITIONS, DIARIZATION_TRANSITIONS } from '../job-transitions.js';
import type { StatedSpeakers } from '../entities.js';
import { statedSpeakersText, type SpeakerLabels, type StoredTurn } from '../speakers.js';
import { fitTimeline } from '../timeline.js';
import { splitSegmentsBySpeaker, type SourceSegment, type Word } from '../word-speakers.js';
import type { DiarizationOutcome } from './finish.js';
import { storedWords } from './progress.js';
import { LIVE_LEASE, StaleLeaseError, fence, type FenceParams, type JobStore } from './store.js';

/**
 * Speaker diarization of the current pass (DIARIZATION_TRANSITIONS): labelling the pass's segments
 * from a diarization's turns, a rerun's request and result, and the speaker names.
 */

/** A pass labelled by diarization: its segments as now stored, and how many speakers own speech in them. */
export interface LabelledPass {
  segments: Array<{ seq: number; start: number; end: number; text: string; speaker: string | null }>;
  speakerCount: number;
}

/** The runtime-log line of a diarization result (columns of the CTE `job`). */
export const DIARIZATION_EVENT_MESSAGE = `case diarization_state
    when 'completed' then 'Speaker diarization completed: ' || diarization_speaker_count ||
      case when diarization_speaker_count = 1 then ' speaker' else ' speakers' end || coalesce(' (' || diarization_engine || ')', '') || '.'
    when 'failed' then 'Speaker diarization failed: ' || coalesce(diarization_error, 'no reason given')
    else 'Speaker diarization unavailable: ' || coalesce(diarization_error, 'no reason given') end`;

/** A stored segment row as labelSegments reads it. */
interface StoredSegmentRow {
  seq: number | null;
  start_seconds: number;
  end_seconds: number;
  text: string;
  words: Word[] | null;
  source_seq: number | null;
  source_text: string | null;
}

/**
 * The segments the worker reported, from the stored rows of a pass: the pieces of a split segment
 * (the same source_seq) joined back into one, with the reported text and all their words.
 */
function reportedSegments(rows: readonly StoredSegmentRow[]): Array<SourceSegment & { seq: number }> {
  const out: Array<SourceSegment & { seq: number; words: Word[] | null }> = [];
  let lastSource: number | null = null;
  for (const r of rows) {
    const source = r.source_seq ?? r.seq ?? 0;
    const prev = out.at(-1);
    if (prev && lastSource === source && r.source_text !== null) {
      prev.end = Math.max(prev.end, r.end_seconds);
      if (r.words?.length) prev.words = [...(prev.words ?? []), ...r.words];
      continue;
    }
    lastSource = source;
    out.push({ seq: source, start: r.start_seconds, end: r.end_seconds, text: r.source_text ?? r.text, words: r.words?.length ? [...r.words] : null });
  }
  return out;
}

/**
 * PASS_SEGMENTS — the current pass's segments behind a live lease, with the job row locked.
 * Parameters: the fence. Guard: LIVE_LEASE. Returns: one row per segment (one row with null segment columns when there are none; none when the lease is not live).
 */
const PASS_SEGMENTS = sql<FenceParams, StoredSegmentRow & { pass: number }>(
  `with l as (select j.id, j.current_pass from speech_leases l join speech_jobs j on j.id = l.job_id where ${LIVE_LEASE} for update of j)
   select l.current_pass as pass, s.seq, s.start_seconds, s.end_seconds, s.text, s.words, s.source_seq, s.source_text
     from l left join speech_segments s on s.job_id = l.id and s.pass = l.current_pass order by s.seq`,
);

/** DELETE_PASS — removes a pass's segments (to write it again: here and in edits.ts). Parameters: :job, :pass. Guard: the caller holds the job row. Returns nothing. */
export const DELETE_PASS = sql<{ job: number; pass: number }>(`delete from speech_segments where job_id = :job and pass = :pass`);

/**
 * INSERT_LABELLED — the labelled segments of a pass (also a corrected pass, edits.ts). Parameters: :job, :pass, parallel arrays :seqs, :starts, :ends, :texts, :speakers,
 * :words, :sources, :sourceTexts. Guard: the caller holds the job row. Returns nothing.
 */
export const INSERT_LABELLED = sql<{
  job: number;
  pass: number;
  seqs: number[];
  starts: number[];
  ends: number[];
  texts: string[];
  speakers: Array<string | null>;
  words: Array<string | null>;
  sources: Array<number | null>;
  sourceTexts: Array<string | null>;
}>(
  `insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text, speaker, words, source_seq, source_text)
   select :job, :pass, v.seq, v.st, v.en, v.tx, v.spk, v.wd::jsonb, v.src, v.stx
     from unnest(:seqs::int[], :starts::float8[], :ends::float8[], :texts::text[], :speakers::text[], :words::text[], :sources::int[], :sourceTexts::text[])
       as v(seq, st, en, tx, spk, wd, src, stx)`,
);

interface RerunEndParams extends FenceParams {
  state: DiarizationState;
  engine: string;
  count: number;
  turns: string;
  error: string | null;
  from: string[];
  analysisFrom: string[];
  analysisTo: string;
}

/**
 * FINISH_RERUN — ends a diarization rerun (a `diarize` lease): :from → :state (completed, failed or
 * unavailable; DIARIZATION_TRANSITIONS.finish), clearing the rerun marker. A completed rerun replaces
 * the turns and starts the speaker names afresh; with more speakers than before, a completed
 * analysis (:analysisFrom) is regenerated (:analysisTo, AI_TRANSITIONS.regenerate) with its task row.
 * Parameters: the fence, :state, :engine, :count, :turns, :error, :from, :analysisFrom, :analysisTo.
 * Guard: LIVE_LEASE of kind diarize; the lease's attempt is the job's; completed; diarization in :from.
 * Returns: the job's diarization afterwards, the speaker count before and whether the analysis is regenerated (0 or 1 rows).
 */
const FINISH_RERUN = sql<
  RerunEndParams,
  {
    id: number;
    diarization_state: DiarizationState;
    diarization_speaker_count: number | null;
    before: number | null;
    regenerate: boolean;
    analysis_language: string | null;
  }
>(
  `with l as (
     update speech_leases l set ended_at = now(), outcome = case when :state = 'completed' then 'completed' else 'failed' end
      where ${LIVE_LEASE} and l.kind = 'diarize'
     returning l.job_id, l.attempt
   ), prev as (
     select j.id, j.diarization_speaker_count as before, j.analysis->>'generation' as analysis_generation from speech_jobs j join l on l.job_id = j.id
   ), job as (
     update speech_jobs j set
        diarization_state = :state,
        diarization_engine = coalesce(nullif(:engine::text, ''), j.diarization_engine),
        diarization_speaker_count = case when :state = 'completed' then :count::int else j.diarization_speaker_count end,
        diarization_turns = case when :state = 'completed' then :turns::jsonb else j.diarization_turns end,
        diarization_error = left(:error::text, 2000),
        speaker_labels = case when :state = 'completed' then '{}'::jsonb else j.speaker_labels end,
        analysis = case when :state = 'completed' and :count::int > coalesce(prev.before, 0) and j.analysis->>'state' = any(:analysisFrom::text[])
          then j.analysis || jsonb_build_object('state', :analysisTo::text, 'generation', (j.analysis->>'generation')::int + 1, 'result', null,
                                                'error', null, 'requested_by', null, 'updated_at', now())
          else j.analysis end,
        diarization_rerun_requested_at = null, diarization_updated_at = now(), updated_at = now()
       from l, prev
      where j.id = l.job_id and prev.id = j.id and j.attempt = l.attempt and j.status = 'completed' and j.diarization_state = any(:from::text[])
     returning j.id, j.current_pass, j.diarization_state, j.diarization_speaker_count, j.diarization_engine, j.diarization_error, prev.before,
               (j.analysis->>'generation') is distinct from prev.analysis_generation as regenerate, (j.analysis->>'generation')::int as generation,
               j.analysis->>'language' as analysis_language
   ), ev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, 'diarization_' || diarization_state, ${DIARIZATION_EVENT_MESSAGE}, case when diarization_state = 'completed' then 'info' else 'warn' end
       from job
     union all
     select id, 'analysis_regenerating', 'The rerun found more speakers (' || coalesce(before, 0) || ' → ' || diarization_speaker_count ||
            '): the analysis and its translations are regenerated from the speaker-aware transcript.', 'info'
       from job where regenerate
   ), regen as (
     insert into speech_ai_tasks (job_id, pass, kind, generation) select id, current_pass, 'analysis', generation from job where regenerate
     on conflict do nothing
   )
   select id, diarization_state, diarization_speaker_count, before, regenerate, analysis_language from job`,
);

/** DIARIZATION_OF — a job's diarization (a repeated rerun result's answer). Parameters: :id. Returns: 0 or 1 rows. */
const DIARIZATION_OF = sql<{ id: number }, { diarization_state: DiarizationState; diarization_speaker_count: number | null }>(
  'select diarization_state, diarization_speaker_count from speech_jobs where id = :id',
);

/**
 * REQUEST_RERUN — DIARIZATION_TRANSITIONS.rerun: :from → :to on a completed job whose media is
 * retained, with the rerun marker set, the preference to diarize persisted and the stated speaker
 * count replaced by the rerun's (null: none, the diarizer counts).
 * Parameters: :id, :from, :to, :speakers (JSON text or null), :message. Guard: completed, media retained, diarization in :from. Returns: the job's id (0 or 1 rows).
 */
const REQUEST_RERUN = sql<{ id: number; from: string[]; to: string; speakers: string | null; message: string }, { id: number }>(
  `with j as (
     update speech_jobs set diarization_state = :to, diarization_requested = true, diarization_rerun_requested_at = now(),
            diarization_speakers = :speakers::jsonb,
            diarization_attempts = 0, diarization_error = null, diarization_updated_at = now(), updated_at = now()
      where id = :id and status = 'completed' and media_path is not null and diarization_state = any(:from::text[])
     returning id
   ), ev as (
     insert into speech_job_events (job_id, event, message) select id, 'diarization_requested', :message from j
   )
   select id from j`,
);

/**
 * RENAME_SPEAKERS — merges names into the current pass's speaker labels (an empty name removes one).
 * Parameters: :id, :labels (a JSON object), :message. Guard: none. Returns: the labels afterwards (0 or 1 rows).
 */
const RENAME_SPEAKERS = sql<{ id: number; labels: string; message: string }, { speaker_labels: SpeakerLabels }>(
  `with j as (
     update speech_jobs set speaker_labels = (
         select coalesce(jsonb_object_agg(k, v), '{}'::jsonb)
           from jsonb_each_text(speaker_labels || :labels::jsonb) as e(k, v) where btrim(v) <> ''),
            updated_at = now()
      where id = :id returning id, speaker_labels
   ), ev as (insert into speech_job_events (job_id, event, message) select id, 'speakers_renamed', :message from j)
   select speaker_labels from j`,
);

/**
 * Labels the lease's pass from a diarization's turns, under the lease fence: segments with words
 * are labelled word by word and split where the speaker changes (splitSegmentsBySpeaker), the
 * others take the turn that overlaps them most (else the nearest). The pass's rows are replaced
 * by the labelled ones, renumbered in order and made one timeline (fitTimeline, see timeline.ts:
 * the pass before the split too, as a pass stored before that existed may be crossed); every row
 * keeps the worker's seq (source_seq) and a split piece the reported text (source_text), so a
 * rerun joins the pieces back and splits them again with its own turns. Runs before the attempt completes, so the transcript is labelled by
 * the time anyone is notified. Returns the labelled segments and how many speakers own speech;
 * null when the lease is not live (the completion that follows answers duplicate or stale).
 */
export function labelSegments(store: JobStore, workerId: number, ref: LeaseRefMsg, turns: StoredTurn[]): Promise<LabelledPass | null> {
  return store.knex.transaction(async (trx) => {
    const rows = await PASS_SEGMENTS.rows(trx, fence(workerId, ref));
    if (!rows.length) return null;
    const pass = rows[0]!.pass;
    const stored = rows.filter((r) => r.seq !== null);
    const sources = fitTimeline(reportedSegments(stored));
    const split = fitTimeline(splitSegmentsBySpeaker(sources, turns));
    const segments = split.map((p, seq) => ({ seq, start: p.start, end: p.end, text: p.text, speaker: p.speaker }));
    if (stored.length) {
      await DELETE_PASS.rows(trx, { job: ref.job_id, pass });
      await INSERT_LABELLED.rows(trx, {
        job: ref.job_id,
        pass,
        seqs: segments.map((x) => x.seq),
        starts: split.map((x) => x.start),
        ends: split.map((x) => x.end),
        texts: split.map((x) => x.text),
        speakers: split.map((x) => x.speaker),
        words: split.map((x) => storedWords(x.words)),
        sources: split.map((x) => sources[x.source]!.seq),
        sourceTexts: split.map((x) => (x.split ? sources[x.source]!.text : null)),
      });
    }
    return { segments, speakerCount: new Set(segments.map((x) => x.speaker).filter((x) => x !== null)).size };
  });
}

/**
 * Ends a diarization rerun (FINISH_RERUN); a failed attempt is failed. A failed rerun keeps the
 * previous labels. Repeating the same completion is a duplicate.
 */
export async function finishDiarization(
  store: JobStore,
  workerId: number,
  ref: LeaseRefMsg,
  result: { success: boolean; error: string; outcome: DiarizationOutcome | null },
): Promise<{ duplicate: boolean; state: DiarizationState; speakerCount: number | null; previousSpeakerCount: number | null }> {
  const o = result.outcome;
  const state: DiarizationState = !result.success ? 'failed' : (o?.state ?? 'unavailable');
  const error =
    state === 'completed'
      ? null
      : (!result.success ? result.error : o?.error) || (state === 'failed' ? 'The diarizer failed.' : 'The worker cannot label speakers.');
  const r = await FINISH_RERUN.first(store.knex, {
    ...fence(workerId, ref),
    state,
    engine: o?.engine ?? '',
    count: o?.speakerCount ?? 0,
    turns: JSON.stringify(o?.turns ?? []),
    error,
    // a rerun's result ends a running rerun (a pending diarization is a transcription attempt's)
    from: DIARIZATION_TRANSITIONS.start.to.filter((s) => DIARIZATION_TRANSITIONS.finish.from.includes(s)),
    analysisFrom: [...AI_TRANSITIONS.regenerate.from],
    analysisTo: AI_TRANSITIONS.regenerate.to[0],
  });
  if (r?.regenerate) {
    store.sink.ai(r.id, { kind: 'analysis', state: 'pending', language: r.analysis_language });
    store.aiQueued();
  }
  if (r) return { duplicate: false, state: r.diarization_state, speakerCount: r.diarization_speaker_count, previousSpeakerCount: r.before };
  const why = await store.staleReason(workerId, ref);
  if (why.outcome === (state === 'completed' ? 'completed' : 'failed')) {
    const now = await DIARIZATION_OF.first(store.knex, { id: ref.job_id });
    return { duplicate: true, state: now?.diarization_state ?? state, speakerCount: now?.diarization_speaker_count ?? null, previousSpeakerCount: null };
  }
  throw new StaleLeaseError(why.message);
}

/**
 * A rerun request (REQUEST_RERUN). Null when the row no longer qualifies (the caller re-reads it
 * to say why).
 */
export async function requestDiarization(store: JobStore, jobId: number, by: string, speakers: StatedSpeakers | null = null): Promise<{ id: number } | null> {
  const r = await REQUEST_RERUN.first(store.knex, {
    id: jobId,
    from: [...DIARIZATION_TRANSITIONS.rerun.from],
    to: DIARIZATION_TRANSITIONS.rerun.to[0],
    speakers: speakers ? JSON.stringify(speakers) : null,
    message: `Speaker diarization requested by ${by}${speakers ? ` (speakers stated: ${statedSpeakersText(speakers)})` : ''}.`,
  });
  if (r) store.sink.diarization(jobId, { state: 'pending', speaker_count: null });
  return r;
}

/** The speaker editor: names for speaker keys of the current pass (an empty name removes it). */
export async function setSpeakerLabels(store: JobStore, jobId: number, labels: Record<string, string>, by: string): Promise<SpeakerLabels | null> {
  const r = await RENAME_SPEAKERS.first(store.knex, { id: jobId, labels: JSON.stringify(labels), message: `Speaker names changed by ${by}.` });
  if (!r) return null;
  store.sink.changed(jobId, 'speakers');
  return r.speaker_labels;
}
