import type { DiarizationState, JobStatus, LeaseRefMsg } from '@sonar/shared';
import { sql } from '../../../db/sql.js';
import { AI_TRANSITIONS, DIARIZATION_TRANSITIONS, fromStatuses, toStatus, type AiState, type JobOutcome } from '../job-transitions.js';
import type { StoredTurn } from '../speakers.js';
import { LANGUAGE_WORDS, TITLE_ELIGIBLE, aiRecord, titleRecord } from './ai.js';
import { DIARIZATION_EVENT_MESSAGE } from './diarization.js';
import { COUNT_DETAIL, SHOWN_SEGMENT } from './segment-count.js';
import { STATUS_COLUMNS, StaleLeaseError, WANTS_NOTIFICATION, hashLeaseToken, type AiParams, type JobStore, type StatusRow } from './store.js';

/**
 * The end of a transcription attempt (JOB_TRANSITIONS.complete and .fail), with the pass's
 * diarization result (DIARIZATION_TRANSITIONS.finish), its AI work (AI_TRANSITIONS.plan) and its
 * notification row.
 */

export interface FinishRequest {
  workerId: number;
  ref: LeaseRefMsg;
  success: boolean;
  error: string;
  cancelled: boolean;
  segmentCount: number;
  durationSeconds: number;
  engine: string;
  engineModel: string;
  shareToken: string;
  /** The diarization the attempt ran (null: none; recorded as unavailable when the job asked for one). */
  diarization: DiarizationOutcome | null;
}

/** A worker's diarization of one pass (CompleteRequest.diarization). */
export interface DiarizationOutcome {
  state: 'completed' | 'failed' | 'unavailable';
  engine: string;
  speakerCount: number;
  turns: StoredTurn[];
  error: string;
}

export interface FinishResult {
  duplicate: boolean;
  status: JobStatus;
  /** The job's diarization afterwards (absent for a duplicate). */
  diarization?: { state: DiarizationState; speakerCount: number | null };
}

interface FinishParams extends AiParams {
  jobs: number[];
  attempts: number[];
  wids: number[];
  hashes: string[];
  success: boolean[];
  cancelled: boolean[];
  reported: number[];
  errors: string[];
  durations: number[];
  engines: string[];
  engineModels: string[];
  shares: string[];
  diarStates: string[];
  diarEngines: string[];
  diarErrors: string[];
  diarCounts: number[];
  diarTurns: string[];
  completeFrom: string[];
  failFrom: string[];
  completed: string;
  failed: string;
  diarFrom: string[];
  diarResults: string[];
  diarUnavailable: string;
  diarPending: string;
  aiPending: string;
  aiUnavailable: string;
  reports: boolean;
}

type FinishRow = StatusRow & {
  outcome: JobOutcome;
  notified: boolean;
  diarization_state: DiarizationState;
  diarization_speaker_count: number | null;
  ai_queued: boolean;
  analysis_state: AiState | null;
  analysis_language: string | null;
  title_state: AiState | null;
};

/**
 * FINISH — ends a batch of attempts (concurrent completions are batched by LeaseService): each
 * lease ends, its job moves to :completed or :failed (outcome cancelled when cancellation was asked
 * for), the transcript is rebuilt from the pass's segments, the pass's diarization takes the
 * worker's result (a failed attempt puts a running one back to :diarPending for the next attempt),
 * the pass's analysis, translations and title are planned (:aiPending, or :aiUnavailable with the
 * reason), and the runtime log and the notification row are written.
 * Parameters: parallel arrays per attempt (:jobs … :diarTurns); the transition table's states; the AI availability; :reports.
 * Guard: the attempt's live lease (this worker, this token, not expired); the lease's attempt is the
 * job's; the job's status in :completeFrom or :failFrom.
 * Returns: one row per job moved: its status columns, outcome, diarization, AI states and whether
 * it was notified or queued AI work.
 */
const FINISH = sql<FinishParams, FinishRow>(
  `with r as (
     select * from unnest(:jobs::int[], :attempts::int[], :wids::int[], :hashes::text[], :success::bool[], :cancelled::bool[],
                          :reported::int[], :errors::text[], :durations::float8[], :engines::text[], :engineModels::text[], :shares::text[],
                          :diarStates::text[], :diarEngines::text[], :diarErrors::text[], :diarCounts::int[], :diarTurns::text[])
       as r(job_id, attempt, wid, hash, success, cancelled, reported, error, duration, engine, engine_model, share,
            diar_state, diar_engine, diar_error, diar_count, diar_turns)
   ), l as (
     update speech_leases l set ended_at = now(), outcome = case when r.success then 'completed' else 'failed' end
       from r
      where l.job_id = r.job_id and l.attempt = r.attempt and l.worker_id = r.wid and l.token_hash = r.hash
        and l.ended_at is null and l.expires_at > now()
     returning l.job_id, l.attempt
   ), acc as (
     -- whether the pass's AI work may run: a provider is configured and the owner has AI access (admins always)
     select l.job_id, case when not :aiOn then :noProvider::text
                           when not (u.is_admin or 'provider_openai' = any(u.permissions)) then :noAccess::text end as block
       from l join speech_jobs jj on jj.id = l.job_id join users u on u.id = jj.owner_id
   ), segs as (
     -- the one segment count (segment-count.ts): the stored segments that hold text, as the transcript shows them
     select l.job_id, (count(*) filter (where ${SHOWN_SEGMENT}))::int as n,
            coalesce(string_agg(btrim(s.text), ' ' order by s.seq) filter (where btrim(s.text) <> ''), '') as text
       from l join speech_jobs j on j.id = l.job_id
       left join speech_segments s on s.job_id = j.id and s.pass = j.current_pass
      group by l.job_id
   ), job as (
     update speech_jobs j set
        status = case when r.success then :completed::text else :failed::text end,
        outcome = case when r.success then 'completed' when r.cancelled or j.cancel_requested_at is not null then 'cancelled' else 'failed' end,
        stage_label = case when r.success then 'Completed' when r.cancelled or j.cancel_requested_at is not null then 'Cancelled' else 'Failed' end,
        stage_detail = case when not r.success then null else ${COUNT_DETAIL('segs.n')} end,
        transcript_text = case when r.success then segs.text else j.transcript_text end,
        failure_error = case when r.success then null when r.cancelled or j.cancel_requested_at is not null then 'Cancelled on request.'
          else left(coalesce(nullif(r.error, ''), 'The worker reported a failure.'), 2000) end,
        audio_position_seconds = case when r.success then greatest(j.audio_position_seconds, r.duration) else j.audio_position_seconds end,
        engine = coalesce(nullif(r.engine, ''), j.engine),
        engine_model = coalesce(nullif(r.engine_model, ''), j.engine_model),
        -- the attempt's diarization (DIARIZATION_TRANSITIONS.finish); a failed attempt leaves it for the next one
        diarization_state = case
          when not r.success then case when j.diarization_state = any(:diarFrom::text[]) then :diarPending::text else j.diarization_state end
          when not j.diarization_requested then j.diarization_state
          when r.diar_state = any(:diarResults::text[]) then r.diar_state
          else :diarUnavailable::text end,
        diarization_engine = case when r.success and j.diarization_requested then nullif(r.diar_engine, '') else j.diarization_engine end,
        diarization_speaker_count = case when r.success and j.diarization_requested
          then case when r.diar_state = 'completed' then r.diar_count end else j.diarization_speaker_count end,
        diarization_turns = case when r.success and j.diarization_requested
          then case when r.diar_state = 'completed' then r.diar_turns::jsonb end else j.diarization_turns end,
        diarization_error = case when r.success and j.diarization_requested then case
          when r.diar_state = 'completed' then null
          when r.diar_state = 'failed' then left(coalesce(nullif(r.diar_error, ''), 'The diarizer failed.'), 2000)
          when r.diar_state = 'unavailable' then left(coalesce(nullif(r.diar_error, ''), 'The worker cannot label speakers.'), 2000)
          else 'The worker that ran this job cannot label speakers (it does not report speaker turns).' end
          else j.diarization_error end,
        diarization_updated_at = case when r.success and j.diarization_requested then now() else j.diarization_updated_at end,
        -- token-API jobs get a public share as soon as the transcript completes
        share_token = case when r.success and j.queue_channel = 'api' and j.share_token is null then r.share else j.share_token end,
        share_created_at = case when r.success and j.queue_channel = 'api' and j.share_token is null then now() else j.share_created_at end,
        -- the pass's AI work (AI_TRANSITIONS.plan): pending, or unavailable with the reason
        analysis = case when r.success and j.analysis_language is not null then ${aiRecord('case when acc.block is null then :aiPending::text else :aiUnavailable::text end', 'j.analysis_language', '1', 'acc.block')}
          else j.analysis end,
        auto_title = case when r.success and ${TITLE_ELIGIBLE} then ${titleRecord('case when acc.block is null then :aiPending::text else :aiUnavailable::text end', 'acc.block')}
          else j.auto_title end,
        finished_at = now(), updated_at = now()
       from l join r on r.job_id = l.job_id join segs on segs.job_id = l.job_id join acc on acc.job_id = l.job_id
      where j.id = l.job_id and j.attempt = l.attempt and j.status = any(case when r.success then :completeFrom::text[] else :failFrom::text[] end)
     returning ${STATUS_COLUMNS}, j.outcome, j.callback_cycle, segs.n, r.reported,
               j.queue_channel, j.callback_url, j.owner_id, r.error, r.success, j.diarization_requested, j.diarization_state,
               j.diarization_speaker_count, j.diarization_engine, j.diarization_error, j.current_pass, j.translation_target_languages,
               j.analysis->>'state' as analysis_state, j.analysis->>'language' as analysis_language, j.auto_title->>'state' as title_state, acc.block
   ), ai_tr as (
     insert into speech_translations (job_id, pass, language, state, error)
     select job.id, job.current_pass, t.lang, case when job.block is null then :aiPending::text else :aiUnavailable::text end, job.block
       from job cross join lateral unnest(job.translation_target_languages) as t(lang)
      where job.success
     on conflict (job_id, pass, language) do nothing
     returning job_id, pass, language, state, generation
   ), ai_tasks as (
     -- translations wait for a pending analysis (they translate it too): its end queues them
     insert into speech_ai_tasks (job_id, pass, kind, language, generation)
     select id, current_pass, 'analysis', '', 1 from job where success and analysis_state = :aiPending
     union all select id, current_pass, 'title', '', 1 from job where success and title_state = :aiPending
     union all select t.job_id, t.pass, 'translation', t.language, t.generation from ai_tr t join job on job.id = t.job_id
      where t.state = :aiPending and job.analysis_state is distinct from :aiPending
     on conflict do nothing
     returning job_id
   ), ai_ev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, 'analysis_' || analysis_state,
            case when analysis_state = 'pending' then 'Transcript analysis queued (' || ${LANGUAGE_WORDS('analysis_language')} || ').'
                 else 'Transcript analysis unavailable: ' || block end,
            case when analysis_state = 'pending' then 'info' else 'warn' end
       from job where success and analysis_state is not null
     union all
     select job.id, 'translations_' || min(t.state),
            case when min(t.state) = 'pending' then 'Translations queued: ' || string_agg(t.language, ', ' order by t.language) || '.'
                 else 'Translations unavailable (' || string_agg(t.language, ', ' order by t.language) || '): ' || job.block end,
            case when min(t.state) = 'pending' then 'info' else 'warn' end
       from job join ai_tr t on t.job_id = job.id group by job.id, job.block
     union all
     -- the automatic title is nobody's request: logged when it is being made, not when it cannot be
     -- (auto_title on the job says why; the coordinator logs a missing provider once at start)
     select id, 'title_pending', 'A title is generated from the transcript (the title is still the file name).', 'info'
       from job where success and title_state = 'pending'
   ), dev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, 'diarization_' || diarization_state, ${DIARIZATION_EVENT_MESSAGE}, case when diarization_state = 'completed' then 'info' else 'warn' end
       from job where success and diarization_requested
   ), ev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, outcome,
            case when outcome = 'completed' and n = 0 then 'Attempt ' || attempt || ' completed: no speech detected.'
                 when outcome = 'completed' then 'Attempt ' || attempt || ' completed with ' || n || case when n = 1 then ' segment' else ' segments' end
                   -- the worker's own count, where it differs (split at speaker changes, empty segments): a diagnostic, not the count
                   || case when reported <> n then ' (the worker sent ' || reported || ')' else '' end || '.'
                 when outcome = 'cancelled' then 'Attempt ' || attempt || ': cancelled on request.'
                 else 'Attempt ' || attempt || ': ' || left(coalesce(nullif(error, ''), 'The worker reported a failure.'), 2000) end,
            case when outcome = 'completed' then 'info' when outcome = 'cancelled' then 'warn' else 'error' end
       from job
   ), note as (
     insert into speech_notifications (job_id, cycle, status) select id, callback_cycle, status from job where ${WANTS_NOTIFICATION}
     on conflict (job_id, cycle) do nothing
     returning job_id
   )
   select id, status, stage_label, stage_detail, audio_position_seconds, attempt, outcome, diarization_state, diarization_speaker_count,
          exists (select 1 from note where note.job_id = job.id) as notified,
          exists (select 1 from ai_tasks where ai_tasks.job_id = job.id) as ai_queued,
          case when success then analysis_state end as analysis_state, case when success then analysis_language end as analysis_language,
          case when success then title_state end as title_state
     from job`,
  'speech_finish',
);

/**
 * JOB_STATUS — the status of a job (a repeated completion's answer).
 * Parameters: :id. Guard: none. Returns: 0 or 1 rows.
 */
const JOB_STATUS = sql<{ id: number }, { status: JobStatus }>(`select status from speech_jobs where id = :id`);

/**
 * Ends attempts as completed or failed (FINISH) in one statement for the whole batch. Repeating the
 * same completion of the same attempt is a duplicate; anything else from an attempt that no longer
 * holds the job is a StaleLeaseError (returned in its place).
 */
export async function finishMany(store: JobStore, items: FinishRequest[]): Promise<Array<FinishResult | StaleLeaseError>> {
  const rows = await FINISH.rows(store.knex, {
    jobs: items.map((i) => i.ref.job_id),
    attempts: items.map((i) => i.ref.attempt),
    wids: items.map((i) => i.workerId),
    hashes: items.map((i) => hashLeaseToken(i.ref.lease_token)),
    success: items.map((i) => i.success),
    cancelled: items.map((i) => i.cancelled),
    reported: items.map((i) => i.segmentCount),
    errors: items.map((i) => i.error),
    durations: items.map((i) => (Number.isFinite(i.durationSeconds) ? i.durationSeconds : 0)),
    engines: items.map((i) => i.engine),
    engineModels: items.map((i) => i.engineModel),
    shares: items.map((i) => i.shareToken),
    diarStates: items.map((i) => i.diarization?.state ?? ''),
    diarEngines: items.map((i) => i.diarization?.engine ?? ''),
    diarErrors: items.map((i) => i.diarization?.error ?? ''),
    diarCounts: items.map((i) => i.diarization?.speakerCount ?? 0),
    diarTurns: items.map((i) => JSON.stringify(i.diarization?.turns ?? [])),
    completeFrom: fromStatuses('complete'),
    failFrom: fromStatuses('fail'),
    completed: toStatus('complete', 'completed'),
    failed: toStatus('fail', 'failed'),
    // a failed attempt puts a running diarization back for the next attempt (only `running` can go back)
    diarFrom: DIARIZATION_TRANSITIONS.start.to.filter((s) => DIARIZATION_TRANSITIONS.finish.from.includes(s)),
    diarResults: [...DIARIZATION_TRANSITIONS.finish.to],
    diarUnavailable: DIARIZATION_TRANSITIONS.finish.to[2],
    diarPending: DIARIZATION_TRANSITIONS.start.from[0],
    aiPending: AI_TRANSITIONS.plan.to[0],
    aiUnavailable: AI_TRANSITIONS.plan.to[1],
    reports: store.reportsEnabled,
    ...store.aiParams(),
  });
  if (rows.length) {
    store.publish(rows);
    for (const r of rows) {
      if (r.analysis_state) store.sink.ai(r.id, { kind: 'analysis', state: r.analysis_state, language: r.analysis_language ?? null });
      if (r.title_state) store.sink.ai(r.id, { kind: 'title', state: r.title_state, language: null });
    }
    if (rows.some((r) => r.ai_queued)) store.aiQueued();
    store.terminal(
      rows,
      rows.some((r) => r.notified),
    );
  }
  const ended = new Map(rows.map((r) => [r.id, r]));
  return Promise.all(
    items.map(async (item): Promise<FinishResult | StaleLeaseError> => {
      const j = ended.get(item.ref.job_id);
      if (j) return { duplicate: false, status: j.status, diarization: { state: j.diarization_state, speakerCount: j.diarization_speaker_count } };
      const why = await store.staleReason(item.workerId, item.ref);
      if (why.outcome === (item.success ? 'completed' : 'failed')) {
        const now = await JOB_STATUS.first(store.knex, { id: item.ref.job_id });
        return { duplicate: true, status: now?.status ?? (item.success ? 'completed' : 'failed') };
      }
      return new StaleLeaseError(why.message);
    }),
  );
}
