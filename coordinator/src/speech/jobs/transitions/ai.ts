import { sql } from '../../../db/sql.js';
import { AI_TRANSITIONS, type AiState } from '../job-transitions.js';
import type { JobStore } from './store.js';

/** Analysis, translations and automatic titles of the current pass (AI_TRANSITIONS). */

export type AiKind = 'analysis' | 'translation' | 'title';

/** One unit of AI work: a row of speech_ai_tasks and the BullMQ job it becomes. */
export interface AiTaskRef {
  jobId: number;
  pass: number;
  kind: AiKind;
  /** The translation's target language ('' for the analysis and the title). */
  language: string;
  generation: number;
}

/** How a task ended: its result, or why not (and the runtime-log line either way). */
export type AiOutcome<T> = { state: 'completed'; result: T; message: string } | { state: 'failed' | 'unavailable'; error: string; message: string };

/** The analysis record of speech_jobs.analysis as built in SQL (see README "AI analysis, translations and titles"). */
export const aiRecord = (state: string, language: string, generation: string, error: string) =>
  `jsonb_build_object('state', ${state}, 'language', ${language}, 'generation', ${generation}, 'provider', null, 'model', null,
     'result', null, 'error', ${error}, 'updated_at', now())`;

/** The automatic-title record of speech_jobs.auto_title. */
export const titleRecord = (state: string, error: string) =>
  `jsonb_build_object('state', ${state}, 'title', null, 'applied', false, 'error', ${error}, 'updated_at', now())`;

/** An uploaded file whose title is still its file name and that the owner never titled (an automatic title never replaces a title a person gave); columns of `j`. */
export const TITLE_ELIGIBLE = `(j.source_type = 'upload' and not j.source_label_edited and (j.source_label is null or j.source_label = j.source_filename))`;

export const LANGUAGE_WORDS = (column: string) => `coalesce(${column}, 'the transcript''s language')`;

/**
 * REQUEST_ANALYSIS — AI_TRANSITIONS.request: :from → :to with the next generation and its task row, on a completed job.
 * Parameters: :id, :by, :from, :to. Guard: completed; analysis state (none without a record) in :from.
 * Returns: the job, pass, generation and analysis language (0 or 1 rows).
 */
const REQUEST_ANALYSIS = sql<
  { id: number; by: string; from: string[]; to: string },
  { id: number; current_pass: number; generation: number; language: string | null }
>(
  `with job as (
     update speech_jobs j set
        analysis = ${aiRecord(':to::text', 'coalesce(j.analysis_language, j.language)', `coalesce((j.analysis->>'generation')::int, 0) + 1`, 'null')}
                   || jsonb_build_object('requested_by', :by::text),
        updated_at = now()
      where j.id = :id and j.status = 'completed' and coalesce(j.analysis->>'state', 'none') = any(:from::text[])
     returning j.id, j.current_pass, (j.analysis->>'generation')::int as generation, j.analysis->>'language' as language
   ), task as (
     insert into speech_ai_tasks (job_id, pass, kind, generation) select id, current_pass, 'analysis', generation from job on conflict do nothing
   ), ev as (
     insert into speech_job_events (job_id, event, message)
     select id, 'analysis_requested', 'Transcript analysis (' || ${LANGUAGE_WORDS('language')} || ') requested by ' || :by || '.' from job
   )
   select * from job`,
);

interface StartParams {
  id: number;
  pass: number;
  gen: number;
  lang: string;
  from: string[];
  to: string;
  provider: string;
  model: string;
}
type StartRow = { id: number; language: string | null; source_language: string | null; before: AiState };

/**
 * START_ANALYSIS / START_TRANSLATION / START_TITLE — AI_TRANSITIONS.start: :from → :to of the task's generation and pass.
 * Parameters: StartParams. Guard: completed job, current pass, state in :from, the task's generation (not for titles).
 * Returns: the target and source language and the state before (0 or 1 rows).
 */
const START_ANALYSIS = sql<StartParams, StartRow>(
  `with prev as (select id, analysis->>'state' as before from speech_jobs where id = :id), job as (
     update speech_jobs j set analysis = j.analysis || jsonb_build_object('state', :to::text, 'provider', :provider::text, 'model', :model::text, 'updated_at', now())
       from prev
      where j.id = prev.id and j.status = 'completed' and j.current_pass = :pass
        and j.analysis->>'state' = any(:from::text[]) and (j.analysis->>'generation')::int = :gen
     returning j.id, j.analysis->>'language' as language, j.language as source_language, prev.before
   ), ev as (
     insert into speech_job_events (job_id, event, message)
     select id, case when before = 'running' then 'analysis_resumed' else 'analysis_running' end,
            case when before = 'running' then 'Transcript analysis started again after an interruption (' else 'Transcript analysis started (' end || :provider || ').'
       from job
   )
   select * from job`,
);

const START_TRANSLATION = sql<StartParams, StartRow>(
  `with prev as (
     select t.id, t.state as before, j.language as source_language from speech_translations t
       join speech_jobs j on j.id = t.job_id and j.current_pass = t.pass and j.status = 'completed'
      where t.job_id = :id and t.pass = :pass and t.language = :lang and t.generation = :gen and t.state = any(:from::text[])
   ), tr as (
     update speech_translations t set state = :to, provider = :provider, model = :model, error = null, updated_at = now()
       from prev where t.id = prev.id
     returning t.job_id as id, t.language, prev.source_language, prev.before
   ), ev as (
     insert into speech_job_events (job_id, event, message)
     select id, case when before = 'running' then 'translation_resumed' else 'translation_running' end,
            case when before = 'running' then 'Translation into ' || language || ' started again after an interruption.' else 'Translation into ' || language || ' started.' end
       from tr
   )
   select * from tr`,
);

const START_TITLE = sql<Omit<StartParams, 'gen' | 'lang' | 'provider' | 'model'>, StartRow>(
  `update speech_jobs j set auto_title = j.auto_title || jsonb_build_object('state', :to::text, 'updated_at', now())
    where j.id = :id and j.status = 'completed' and j.current_pass = :pass and j.auto_title->>'state' = any(:from::text[])
   returning j.id, j.language, j.language as source_language, 'pending' as before`,
);

interface OutcomeParams {
  id: number;
  pass: number;
  gen: number;
  lang: string;
  state: string;
  result: string | null;
  error: string | null;
  message: string;
  from: string[];
}

/**
 * FINISH_ANALYSIS — AI_TRANSITIONS.finish: :from → :state of the task's generation. A completed
 * analysis queues every translation of the pass that is not unavailable again (AI_TRANSITIONS.translate,
 * next generation); an analysis that did not complete lets the translations that waited for it go ahead.
 * Parameters: OutcomeParams, :translateFrom, :translateTo. Guard: current pass, analysis in :from, the generation; translations in :translateFrom.
 * Returns: the job, the analysis language and how many translations were queued (0 or 1 rows).
 */
const FINISH_ANALYSIS = sql<OutcomeParams & { translateFrom: string[]; translateTo: string }, { id: number; language: string | null; queued: number }>(
  `with job as (
     update speech_jobs j set
        analysis = j.analysis || jsonb_build_object('state', :state::text, 'result', :result::jsonb, 'error', :error::text, 'updated_at', now()),
        updated_at = now()
      where j.id = :id and j.current_pass = :pass and j.analysis->>'state' = any(:from::text[]) and (j.analysis->>'generation')::int = :gen
     returning j.id, j.current_pass, j.analysis->>'language' as language
   ), requeue as (
     update speech_translations t set state = :translateTo, generation = t.generation + case when t.state = :translateTo then 0 else 1 end,
            error = null, updated_at = now()
       from job where :state::text = 'completed' and t.job_id = job.id and t.pass = job.current_pass and t.state = any(:translateFrom::text[])
     returning t.job_id, t.pass, t.language, t.generation
   ), waiting as (
     select t.job_id, t.pass, t.language, t.generation from speech_translations t join job on t.job_id = job.id and t.pass = job.current_pass
      where :state::text <> 'completed' and t.state = :translateTo
   ), tasks as (
     insert into speech_ai_tasks (job_id, pass, kind, language, generation)
     select job_id, pass, 'translation', language, generation from requeue
     union all select job_id, pass, 'translation', language, generation from waiting
     on conflict do nothing
     returning id
   ), ev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, 'analysis_' || :state::text, :message, case when :state::text = 'completed' then 'info' else 'warn' end from job
   )
   select job.id, job.language, (select count(*) from requeue)::int + (select count(*) from waiting)::int as queued from job`,
);

/**
 * FINISH_TRANSLATION — AI_TRANSITIONS.finish of one translation (its generation only).
 * Parameters: OutcomeParams, :translated, :segments, :analysis. Guard: the job's current pass, state in :from, the generation.
 * Returns: the job (0 or 1 rows).
 */
const FINISH_TRANSLATION = sql<OutcomeParams & { translated: string | null; segments: string | null; analysis: string | null }, { id: number }>(
  `with tr as (
     update speech_translations t set state = :state::text, text = :translated, segments = :segments::jsonb, analysis = :analysis::jsonb,
            error = :error::text, updated_at = now()
       from speech_jobs j
      where j.id = t.job_id and j.current_pass = t.pass and t.job_id = :id and t.pass = :pass and t.language = :lang
        and t.generation = :gen and t.state = any(:from::text[])
     returning t.job_id as id
   ), ev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, 'translation_' || :state::text, :message, case when :state::text = 'completed' then 'info' else 'warn' end from tr
   )
   select id from tr`,
);

/**
 * FINISH_TITLE — AI_TRANSITIONS.finish of the automatic title. A completed title becomes the job's
 * title only while TITLE_ELIGIBLE holds on the row (an edit that came first wins).
 * Parameters: OutcomeParams, :title. Guard: current pass, title state in :from. Returns: the job and whether the title was applied (0 or 1 rows).
 */
const FINISH_TITLE = sql<OutcomeParams & { title: string | null }, { id: number; applied: boolean }>(
  `with job as (
     update speech_jobs j set
        source_label = case when :state::text = 'completed' and ${TITLE_ELIGIBLE} then :title::text else j.source_label end,
        auto_title = j.auto_title || jsonb_build_object('state', :state::text, 'title', :title::text,
          'applied', :state::text = 'completed' and ${TITLE_ELIGIBLE}, 'error', :error::text, 'updated_at', now()),
        updated_at = now()
      where j.id = :id and j.current_pass = :pass and j.auto_title->>'state' = any(:from::text[])
     returning j.id, (j.auto_title->>'applied')::boolean as applied
   ), ev as (
     insert into speech_job_events (job_id, event, message, level)
     select id, 'title_' || :state::text,
            case when :state::text <> 'completed' then :message
                 when applied then 'Title generated from the transcript: "' || :title || '".'
                 else 'A title was generated ("' || :title || '") but not applied: the title was changed meanwhile.' end,
            case when :state::text = 'completed' then 'info' else 'warn' end
       from job
   )
   select id, applied from job`,
);

/** POST analyze (REQUEST_ANALYSIS). Null when the job is not completed or an analysis is pending or running (the caller re-reads the row to say which). */
export async function requestAnalysis(store: JobStore, jobId: number, by: string): Promise<AiTaskRef | null> {
  const r = await REQUEST_ANALYSIS.first(store.knex, { id: jobId, by, from: [...AI_TRANSITIONS.request.from], to: AI_TRANSITIONS.request.to[0] });
  if (!r) return null;
  store.sink.ai(jobId, { kind: 'analysis', state: 'pending', language: r.language });
  store.aiQueued();
  return { jobId, pass: r.current_pass, kind: 'analysis', language: '', generation: r.generation };
}

/**
 * A queue worker takes a task (START_*). Null when the task is stale: another generation or pass
 * superseded it, or it already ended.
 */
export async function startAi(
  store: JobStore,
  ref: AiTaskRef,
  provider: { label: string; model: string },
): Promise<{ language: string | null; sourceLanguage: string | null } | null> {
  const from = [...AI_TRANSITIONS.start.from];
  const to = AI_TRANSITIONS.start.to[0];
  const params = { id: ref.jobId, pass: ref.pass, gen: ref.generation, lang: ref.language, from, to, provider: provider.label, model: provider.model };
  const r =
    ref.kind === 'analysis'
      ? await START_ANALYSIS.first(store.knex, params)
      : ref.kind === 'translation'
        ? await START_TRANSLATION.first(store.knex, params)
        : await START_TITLE.first(store.knex, { id: ref.jobId, pass: ref.pass, from, to });
  if (!r) return null;
  store.sink.ai(ref.jobId, { kind: ref.kind, state: 'running', language: ref.kind === 'translation' ? ref.language : r.language });
  return { language: r.language, sourceLanguage: r.source_language };
}

function outcomeParams(ref: AiTaskRef, outcome: AiOutcome<unknown>): OutcomeParams {
  if (!(AI_TRANSITIONS.finish.to as readonly string[]).includes(outcome.state)) throw new Error(`an AI task cannot end as ${outcome.state}`);
  return {
    id: ref.jobId,
    pass: ref.pass,
    gen: ref.generation,
    lang: ref.language,
    state: outcome.state,
    result: outcome.state === 'completed' && ref.kind === 'analysis' ? JSON.stringify(outcome.result) : null,
    error: outcome.state === 'completed' ? null : outcome.error.slice(0, 2000),
    message: outcome.message,
    from: [...AI_TRANSITIONS.finish.from],
  };
}

/** The analysis's result (FINISH_ANALYSIS); a stale result is dropped: null. */
export async function finishAnalysis(store: JobStore, ref: AiTaskRef, outcome: AiOutcome<unknown>): Promise<{ translationsQueued: number } | null> {
  const r = await FINISH_ANALYSIS.first(store.knex, {
    ...outcomeParams(ref, outcome),
    translateFrom: [...AI_TRANSITIONS.translate.from],
    translateTo: AI_TRANSITIONS.translate.to[0],
  });
  if (!r) return null;
  store.sink.ai(ref.jobId, { kind: 'analysis', state: outcome.state, language: r.language });
  if (r.queued > 0) store.aiQueued();
  return { translationsQueued: r.queued };
}

/** One translation's result (FINISH_TRANSLATION); a stale result is dropped: false. */
export async function finishTranslation(
  store: JobStore,
  ref: AiTaskRef,
  outcome: AiOutcome<{ text: string; segments: Array<{ seq: number; text: string }>; analysis: unknown }>,
): Promise<boolean> {
  const done = outcome.state === 'completed' ? outcome.result : null;
  const rows = await FINISH_TRANSLATION.rows(store.knex, {
    ...outcomeParams(ref, outcome),
    translated: done?.text ?? null,
    segments: done ? JSON.stringify(done.segments) : null,
    analysis: done?.analysis ? JSON.stringify(done.analysis) : null,
  });
  if (!rows.length) return false;
  store.sink.ai(ref.jobId, { kind: 'translation', state: outcome.state, language: ref.language });
  return true;
}

/** The automatic title's result (FINISH_TITLE): whether it was applied. */
export async function finishTitle(store: JobStore, ref: AiTaskRef, outcome: AiOutcome<string>): Promise<{ applied: boolean; title: string | null } | null> {
  const title = outcome.state === 'completed' ? outcome.result : null;
  const r = await FINISH_TITLE.first(store.knex, { ...outcomeParams(ref, outcome), title });
  if (!r) return null;
  store.sink.ai(ref.jobId, { kind: 'title', state: outcome.state, language: null, ...(r.applied && title ? { title } : {}) });
  return { applied: r.applied, title };
}
