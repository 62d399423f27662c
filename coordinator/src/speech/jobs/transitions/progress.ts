import { JOB_STATUS_LABELS, type JobStatus, type LeaseRefMsg } from '@sonar/shared';
import { sql } from '../../../db/sql.js';
import { DIARIZATION_TRANSITIONS, fromStatuses, toStatus } from '../job-transitions.js';
import { fitTimeline } from '../timeline.js';
import type { Word } from '../word-speakers.js';
import { LIVE_LEASE, STATUS_COLUMNS, fence, hashLeaseToken, type FenceParams, type JobStore, type StatusRow } from './store.js';

/**
 * A runner's moves while it holds a lease: reading and renewing it, reporting progress
 * (JOB_TRANSITIONS.stage, DIARIZATION_TRANSITIONS.start of an attempt) and handing the job back
 * (JOB_TRANSITIONS.handBack).
 */

export interface ProgressBatch {
  ref: LeaseRefMsg;
  workerId: number;
  stage: JobStatus;
  stageDetail: string;
  position: number;
  durationSeconds: number;
  engine: string;
  engineModel: string;
  segments: Array<{ seq: number; start: number; end: number; text: string; words?: readonly Word[] }>;
  /** The worker started diarizing this attempt (ProgressUpdate.diarization_state "running"). */
  diarizing: boolean;
}

/** Words kept per segment (a 30 s whisper window holds under 200). */
const MAX_SEGMENT_WORDS = 2000;

/** Cumulative transcript kept while a job runs; the full text is rebuilt from segments at completion. */
const MAX_RUNNING_TEXT = 64 * 1024;

/** Words as stored in speech_segments.words (a JSON array), or null when there are none. */
export function storedWords(words: readonly Word[] | null | undefined): string | null {
  const ok = (words ?? [])
    .filter((w) => Number.isFinite(w.start) && Number.isFinite(w.end) && w.end >= w.start && typeof w.text === 'string' && w.text.trim())
    .slice(0, MAX_SEGMENT_WORDS)
    .map((w) => ({ start: w.start, end: w.end, text: w.text.trim().slice(0, 200) }));
  return ok.length ? JSON.stringify(ok) : null;
}

/**
 * LIVE_LEASE_OF — the job behind a live lease.
 * Parameters: the fence (:job, :attempt, :wid, :hash). Guard: LIVE_LEASE. Returns: the pass, the cancel flag and the media (0 or 1 rows).
 */
const LIVE_LEASE_OF = sql<FenceParams, { pass: number; cancelRequested: boolean; mediaPath: string | null; mediaSha256: string | null }>(
  `select j.current_pass as pass, (j.cancel_requested_at is not null) as "cancelRequested", j.media_path as "mediaPath", j.media_sha256 as "mediaSha256"
     from speech_leases l join speech_jobs j on j.id = l.job_id where ${LIVE_LEASE}`,
  'speech_live_lease',
);

/**
 * RENEW — extends a worker's live leases.
 * Parameters: parallel arrays :jobs, :attempts, :hashes; :ttl, :wid.
 * Guard: each lease is this worker's, with this token, not ended, not expired (database clock).
 * Returns: one row per renewed lease: its job, new expiry (epoch ms) and the job's cancel flag.
 */
const RENEW = sql<{ jobs: number[]; attempts: number[]; hashes: string[]; ttl: number; wid: number }, { job_id: number; cancel: boolean; expires_ms: number }>(
  `with refs as (select * from unnest(:jobs::int[], :attempts::int[], :hashes::text[]) as r(job_id, attempt, token_hash)),
   renewed as (
     update speech_leases l set expires_at = now() + make_interval(secs => :ttl), last_heartbeat_at = now()
       from refs where l.job_id = refs.job_id and l.attempt = refs.attempt and l.token_hash = refs.token_hash
        and l.worker_id = :wid and l.ended_at is null and l.expires_at > now()
     returning l.job_id, l.expires_at
   )
   select r.job_id, floor(extract(epoch from r.expires_at) * 1000)::float8 as expires_ms, (j.cancel_requested_at is not null) as cancel
     from renewed r join speech_jobs j on j.id = r.job_id`,
  'speech_renew',
);

interface ProgressParams extends FenceParams {
  seqs: number[];
  starts: number[];
  ends: number[];
  texts: string[];
  words: Array<string | null>;
  from: string[];
  status: JobStatus;
  label: string;
  detail: string;
  pos: number;
  duration: number;
  engine: string;
  engineModel: string;
  diarizing: boolean;
  diarFrom: string;
  diarTo: string;
}

/**
 * PROGRESS — a batch of progress under the lease fence: new segments (deduplicated by job, pass
 * and seq), stage (:status, one of JOB_TRANSITIONS.stage.to), position and the running text; the
 * pass's diarization starts (DIARIZATION_TRANSITIONS.start, :diarFrom → :diarTo) when the worker says so.
 * The batch comes fitted as one timeline (fitTimeline); each new segment's times, and its words'
 * when it moves, are clamped between its stored neighbours (`b`: the previous seq's end, the next
 * seq's start), so what is stored stays one timeline whatever the worker resends (see timeline.ts).
 * Parameters: the fence; parallel segment arrays :seqs, :starts, :ends, :texts, :words; :from, :status, :label,
 * :detail, :pos, :duration, :engine, :engineModel, :diarizing, :diarFrom, :diarTo.
 * Guard: LIVE_LEASE; the job's status in :from (JOB_TRANSITIONS.stage.from).
 * Returns: one row: whether the lease was live, the seqs stored, and the job's status columns (null when it did not move).
 */
const PROGRESS = sql<
  ProgressParams,
  { live: boolean; stored: number[] | null; diarization_state: string | null } & (StatusRow | { [K in keyof StatusRow]: null })
>(
  `with l as (
     select l.id, j.current_pass from speech_leases l join speech_jobs j on j.id = l.job_id where ${LIVE_LEASE}
   ), seg as (
     insert into speech_segments (job_id, pass, seq, start_seconds, end_seconds, text, words)
     select :job, l.current_pass, s.seq, greatest(least(s.st, b.ceiling), b.floor), greatest(least(s.en, b.ceiling), b.floor), s.tx,
            case when s.wd is null or (s.st >= b.floor and s.en <= b.ceiling) then s.wd::jsonb
              else (select jsonb_agg(jsonb_build_object('start', greatest(least((w->>'start')::float8, b.ceiling), b.floor),
                                                        'end', greatest(least((w->>'end')::float8, b.ceiling), b.floor), 'text', w->'text') order by i)
                      from jsonb_array_elements(s.wd::jsonb) with ordinality as x(w, i)) end
       from l, unnest(:seqs::int[], :starts::float8[], :ends::float8[], :texts::text[], :words::text[]) as s(seq, st, en, tx, wd),
            lateral (select
              coalesce((select p.end_seconds from speech_segments p where p.job_id = :job and p.pass = l.current_pass and p.seq < s.seq
                         order by p.seq desc limit 1), 0) as floor,
              coalesce((select n.start_seconds from speech_segments n where n.job_id = :job and n.pass = l.current_pass and n.seq > s.seq
                         order by n.seq limit 1), 'Infinity'::float8) as ceiling) b
     on conflict (job_id, pass, seq) do nothing
     returning seq, text
   ), added as (
     select string_agg(btrim(text), ' ' order by seq) filter (where btrim(text) <> '') as text, array_agg(seq order by seq) as seqs from seg
   ), job as (
     update speech_jobs j set
        status = :status,
        stage_label = :label, stage_detail = nullif(:detail::text, ''),
        audio_position_seconds = greatest(j.audio_position_seconds, :pos::float8),
        source_duration_seconds = coalesce(j.source_duration_seconds, nullif(:duration::float8, 0)),
        engine = coalesce(nullif(:engine::text, ''), j.engine),
        engine_model = coalesce(nullif(:engineModel::text, ''), j.engine_model),
        transcript_text = case when added.text is null then j.transcript_text
          else right(concat_ws(' ', j.transcript_text, added.text), ${MAX_RUNNING_TEXT}) end,
        diarization_state = case when :diarizing and j.diarization_requested and j.diarization_state = :diarFrom then :diarTo else j.diarization_state end,
        diarization_updated_at = case when :diarizing and j.diarization_requested and j.diarization_state = :diarFrom then now() else j.diarization_updated_at end,
        updated_at = now()
       from l, added
      where j.id = :job and j.status = any(:from::text[])
     returning ${STATUS_COLUMNS}, j.diarization_state
   )
   -- no lease row is written here: completion locks lease then job, so progress (job only) cannot deadlock with it;
   -- liveness reads the job's updated_at as the time of the last progress
   select exists (select 1 from l) as live, (select seqs from added) as stored, job.*
     from (select 1) one left join job on true`,
  'speech_progress',
);

/**
 * HAND_BACK — the runner hands its job back (shutdown): JOB_TRANSITIONS.handBack, queued again
 * with one more attempt allowed (no retry used up), its lease ended as `released`.
 * Parameters: the fence, :detail, :message (the runtime-log line), :from, :to. Guard: LIVE_LEASE; the job's attempt and a status in :from.
 * Returns: the job's status columns (0 or 1 rows).
 */
const HAND_BACK = sql<FenceParams & { detail: string; message: string; from: string[]; to: string }, StatusRow>(
  `with l as (
     update speech_leases l set ended_at = now(), outcome = 'released' where ${LIVE_LEASE} returning l.job_id, l.attempt
   ), job as (
     update speech_jobs j set status = :to, max_attempts = j.max_attempts + 1, stage_label = 'Waiting for a worker',
        stage_detail = :detail, audio_position_seconds = 0, transcript_text = null, updated_at = now()
       from l where j.id = l.job_id and j.attempt = l.attempt and j.status = any(:from::text[])
     returning ${STATUS_COLUMNS}
   ), ev as (
     insert into speech_job_events (job_id, event, message, level) select id, 'released', :message, 'warn' from job
   )
   select * from job`,
  'speech_hand_back',
);

/** The pass, cancel flag and media of a live lease; StaleLeaseError otherwise. */
export async function liveLease(
  store: JobStore,
  workerId: number,
  ref: LeaseRefMsg,
): Promise<{ pass: number; cancelRequested: boolean; mediaPath: string | null; mediaSha256: string | null }> {
  return (await LIVE_LEASE_OF.first(store.knex, fence(workerId, ref))) ?? store.stale(workerId, ref);
}

/** Renews the presented live leases in one statement; returns cancel requests, lost jobs and the new expiry. */
export async function renew(
  store: JobStore,
  workerId: number,
  refs: LeaseRefMsg[],
  ttlSeconds: number,
): Promise<{ cancel: number[]; lost: number[]; expiresAt: number }> {
  if (!refs.length) return { cancel: [], lost: [], expiresAt: 0 };
  const rows = await RENEW.rows(store.knex, {
    jobs: refs.map((r) => r.job_id),
    attempts: refs.map((r) => r.attempt),
    hashes: refs.map((r) => hashLeaseToken(r.lease_token)),
    ttl: ttlSeconds,
    wid: workerId,
  });
  const live = new Set(rows.map((r) => r.job_id));
  return {
    cancel: rows.filter((r) => r.cancel).map((r) => r.job_id),
    lost: refs.map((r) => r.job_id).filter((id) => !live.has(id)),
    expiresAt: rows.length ? Math.max(...rows.map((r) => r.expires_ms)) : 0,
  };
}

/**
 * Writes a batch of progress under the lease fence in one statement (PROGRESS). StaleLeaseError
 * when the lease is no longer live. Returns the seqs that were new. The batch's segments are made
 * one timeline first, in seq order, a repeated seq counting once (the first; PROGRESS keeps only
 * that one too); PROGRESS fits them to what is stored.
 */
export async function writeProgress(store: JobStore, batch: ProgressBatch): Promise<number[]> {
  const seen = new Set<number>();
  const unique = batch.segments.filter((s) => !seen.has(s.seq) && seen.add(s.seq));
  const segs = fitTimeline(unique.sort((a, b) => a.seq - b.seq));
  const r = (await PROGRESS.first(store.knex, {
    ...fence(batch.workerId, batch.ref),
    seqs: segs.map((s) => s.seq),
    starts: segs.map((s) => s.start),
    ends: segs.map((s) => s.end),
    texts: segs.map((s) => s.text.slice(0, 10_000)),
    words: segs.map((s) => storedWords(s.words)),
    from: fromStatuses('stage'),
    status: toStatus('stage', batch.stage),
    label: JOB_STATUS_LABELS[batch.stage],
    detail: batch.stageDetail,
    pos: batch.position,
    duration: batch.durationSeconds,
    engine: batch.engine,
    engineModel: batch.engineModel,
    diarizing: batch.diarizing,
    diarFrom: DIARIZATION_TRANSITIONS.start.from[0],
    diarTo: DIARIZATION_TRANSITIONS.start.to[0],
  }))!;
  if (!r.live) return store.stale(batch.workerId, batch.ref);
  if (r.id !== null) {
    store.publish([r]);
    if (batch.diarizing && r.diarization_state === 'running') store.sink.diarization(r.id, { state: 'running', speaker_count: null });
  }
  return r.stored ?? [];
}

/** The worker hands its job back unfinished (shutdown): queued again without using up a retry. */
export async function handBack(store: JobStore, workerId: number, ref: LeaseRefMsg, reason: string): Promise<void> {
  const rows = await HAND_BACK.rows(store.knex, {
    ...fence(workerId, ref),
    detail: `Handed back by the worker: ${reason}`.slice(0, 500),
    // the fence holds the job at this attempt, so the log line is written here
    message: `Attempt ${ref.attempt} handed back: ${reason.slice(0, 500)}`,
    from: fromStatuses('handBack'),
    to: toStatus('handBack', 'queued'),
  });
  if (!rows.length) return store.stale(workerId, ref);
  store.publish(rows);
}
