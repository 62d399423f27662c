import { JOB_STATUS_LABELS, UNRESPONSIVE_WARNING_SECONDS, estimateFinish, formatStockholm, speakerColourClass } from '@sonar/shared';
import { html, SafeHtml } from '../http/html.js';
import type { SpeechJob, StatedSpeakers } from './jobs/entities.js';
import { NO_SPEECH_DETAIL, type presentJobDetail } from './jobs/presenter.js';
import type { RetranscriptionState } from './jobs/retranscription.js';
import type { EditRow } from './jobs/transitions/edits.js';
import type { ReadingRow } from './jobs/job-repository.js';
import { speakerAwareTranscript, statedSpeakersText, type presentDiarization } from './jobs/speakers.js';
import { MAX_STATED_SPEAKERS } from './schemas.js';
import { TRANSCRIPT_FORMATS } from './jobs/transcript-formats.js';
import { isProcessing } from './jobs/job-transitions.js';
import { languageName } from './ai/work.js';
import { playerMarkup, readingTools, readingTurns } from './reading-view.js';

/**
 * The cards of the job page `/speech/jobs/{jobId}`, one render function each (so the page can
 * grow card by card). Every card reads without JavaScript; forms post without it. The browser
 * module (coordinator/web/pages/job.ts) adds live segments, status, the liveness warning, the
 * estimated finish and the worker card's refresh, and finds its elements by the ids set here.
 */

export type JobView = ReturnType<typeof presentJobDetail>;
type PresentedDiarization = ReturnType<typeof presentDiarization>;

const csrfField = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`;

/**
 * The head of the page: title, status and stage, a failure or cancellation, progress and the
 * estimated finish (these move live). The other facts are the side column's `facts` card.
 */
export function summaryCard(job: SpeechJob, p: JobView): SafeHtml {
  const eta = isProcessing(job.status)
    ? estimateFinish({
        durationSeconds: p.source_duration_seconds,
        positionSeconds: p.progress.audio_position_seconds,
        startedAt: p.started_at,
        progressAt: job.audioPositionSeconds > 0 ? p.updated_at : null,
      })
    : null;
  return html`<div class="card job-head" id="summary"><h1>${p.source_label}</h1>
    <p><span class="badge" id="job-status" data-status="${p.status}">${JOB_STATUS_LABELS[job.status]}</span>
      <span id="job-stage">${p.stage_label && p.stage_label !== p.status_label ? p.stage_label : ''}</span>${p.stage_detail ? html` · <span id="job-detail">${p.stage_detail}</span>` : ''}</p>
    ${p.failure_error ? html`<p class="error" id="failure">${p.failure_error}</p>` : ''}
    ${p.cancel_requested && isProcessing(job.status) ? html`<p class="warning" id="cancel-requested">Cancellation requested; the worker stops at its next heartbeat.</p>` : ''}
    <dl class="facts inline">
      <dt>Progress</dt><dd id="job-progress" data-position="${p.progress.audio_position_seconds}" data-duration="${p.source_duration_seconds ?? ''}" data-started="${p.started_at ?? ''}">${
        p.progress.percent !== null ? `${p.progress.percent} %` : job.status === 'completed' ? 'done' : '—'
      }${p.progress.throughput ? ` · ${speedText(p.progress.throughput)}` : ''}</dd>
      <dt>Estimated finish</dt><dd id="job-eta">${eta ? html`<time datetime="${eta.toISOString()}">${formatStockholm(eta)}</time>` : html`<span class="muted">${isProcessing(job.status) ? 'after the first completed segment' : '—'}</span>`}</dd>
    </dl></div>`;
}

/** The facts of the job: model and engine, language, length, times, attempt, source and note. */
export function factsCard(job: SpeechJob, p: JobView): SafeHtml {
  return html`<div class="card" id="facts"><h2>Facts</h2>
    <dl class="facts">
      <dt>Model</dt><dd id="job-model">${p.model}${job.currentPass > 1 ? ` · pass ${job.currentPass}` : ''}${
        p.engine
          ? ` · ${p.engine}${p.engine_model && p.engine_model !== p.engine ? ` (${p.engine_model})` : ''}`
          : job.status === 'failed'
            ? ' (requested; no engine ran)'
            : ''
      }</dd>
      ${p.language ? html`<dt>Language</dt><dd>${p.language}</dd>` : ''}
      ${p.source_duration_human ? html`<dt>Length</dt><dd>${p.source_duration_human}</dd>` : ''}
      <dt>Queued</dt><dd><time datetime="${p.created_at}">${formatStockholm(p.created_at)}</time> · ${p.queue_channel_label}</dd>
      ${p.started_at ? html`<dt>Started</dt><dd><time datetime="${p.started_at}">${formatStockholm(p.started_at)}</time></dd>` : ''}
      ${p.finished_at ? html`<dt>Finished</dt><dd><time datetime="${p.finished_at}">${formatStockholm(p.finished_at)}</time></dd>` : ''}
      <dt>Attempt</dt><dd>${p.attempt} of ${p.max_attempts}</dd>
      ${p.source_url ? html`<dt>Source</dt><dd class="mono">${p.source_url}</dd>` : ''}
      ${p.source_note ? html`<dt>Note</dt><dd class="transcript" id="source-note">${p.source_note}</dd>` : ''}
    </dl></div>`;
}

/**
 * Liveness: the state from the server, and the warning that appears after 90 seconds without a
 * runner heartbeat. The warning is separate from automatic reclaiming, which
 * happens once the lease expires; the script re-evaluates the silence every second.
 */
export function livenessCard(job: SpeechJob, p: JobView): SafeHtml {
  const l = p.liveness;
  const warn = l.state === 'unresponsive' || l.state === 'stale';
  return html`<div class="card" id="liveness" data-state="${l.state}" data-processing="${isProcessing(job.status) ? '1' : '0'}"
      data-seconds-since-heartbeat="${l.seconds_since_heartbeat ?? ''}" data-last-heartbeat="${l.last_heartbeat_at ?? ''}" data-warn-after="${UNRESPONSIVE_WARNING_SECONDS}">
    <h2>Liveness</h2>
    <p id="liveness-state">${livenessText(l)}</p>
    <p class="warning" id="liveness-warning" role="alert" ${warn ? '' : new SafeHtml('hidden')}>No heartbeat from the runner for <span id="silence-seconds">${l.seconds_since_heartbeat ?? UNRESPONSIVE_WARNING_SECONDS}</span> s: the runner has likely stopped.
      Automatic recovery is separate: the job is queued again once its lease expires${l.lease_expires_at ? html` (<time datetime="${l.lease_expires_at}">${formatStockholm(l.lease_expires_at)}</time>)` : ''}.</p>
  </div>`;
}

const LIVENESS_TEXT: Record<string, string> = {
  inactive: 'No runner is working on this job.',
  active: 'A runner is working on this job and reporting progress.',
  quiet: 'The runner sends heartbeats but has reported no progress for a while (a hard part of the recording?).',
  unresponsive: 'No heartbeat for 90 seconds or more.',
  stale: 'No heartbeat and the lease has expired: automatic recovery will queue the job again.',
  suspect: 'Something is off.',
};

function livenessText(l: JobView['liveness']): string {
  return `${LIVENESS_TEXT[l.state] ?? l.state}${l.reason ? ` ${l.reason}.` : ''}`;
}

/**
 * The worker card: who runs the job (lease), its last heartbeat and the execution target. The
 * script refreshes it every 15 seconds while the tab is visible and keeps the last valid snapshot
 * when a refresh fails, saying so.
 */
export function workerCard(p: JobView): SafeHtml {
  const l = p.liveness;
  return html`<div class="card" id="worker-card" data-job="${p.id}"><h2>Worker</h2>
    <dl class="facts">
      <dt>Runner</dt><dd id="worker-name">${l.worker ?? 'none'}</dd>
      <dt>Attempt</dt><dd id="worker-attempt">${l.attempt ?? '—'}</dd>
      <dt>Last heartbeat</dt><dd id="worker-heartbeat">${l.last_heartbeat_at ? formatStockholm(l.last_heartbeat_at) : '—'}</dd>
      <dt>Lease expires</dt><dd id="worker-lease">${l.lease_expires_at ? formatStockholm(l.lease_expires_at) : '—'}</dd>
      <dt>Target</dt><dd id="worker-target">${p.execution_target.mode === 'worker' ? `worker ${p.execution_target.worker ?? '?'}` : p.execution_target.mode}</dd>
    </dl>
    <p class="muted" id="worker-refreshed" role="status">As of ${formatStockholm(new Date())}.</p></div>`;
}

/**
 * The pace of a transcription (audio seconds per wall-clock second) in words nobody misreads:
 * "1.9× faster than real time", or "taking 1.9× the recording's length" when slower.
 */
export function speedText(throughput: number): string {
  if (throughput >= 1) return `${throughput.toFixed(1)}× faster than real time`;
  return `taking ${(1 / throughput).toFixed(1)}× the recording’s length`;
}

/** Downloads of the current pass (also while it runs: the segments so far); the speaker turns (RTTM) once diarized. */
export function downloadsCard(p: JobView): SafeHtml {
  const names: Record<string, string> = {
    txt: 'Text (TXT)',
    srt: 'Subtitles (SRT)',
    vtt: 'Subtitles (WebVTT)',
    json: 'Segments (JSON)',
    docx: 'Word document (DOCX)',
  };
  return html`<div class="card" id="downloads"><h2>Download</h2><p class="downloads">${[...TRANSCRIPT_FORMATS, 'docx'].map(
    (f) => html`<a href="/api/speech/jobs/${p.id}/transcript.${f}" download data-format="${f}">${names[f]}</a>`,
  )}${
    p.diarization.state === 'completed' ? html`<a href="/api/speech/jobs/${p.id}/transcript.rttm" download data-format="rttm">Speaker turns (RTTM)</a>` : ''
  }</p></div>`;
}

/** Share create/disable with the link, and cancel / restart / delete, as forms that post without script. */
export function actionsCard(job: SpeechJob, p: JobView, csrf: string, mayChange: boolean, error: string | undefined): SafeHtml | '' {
  if (!mayChange) return '';
  const processing = isProcessing(job.status);
  return html`<div class="card" id="actions"><h2>Share and manage</h2>
    ${error ? html`<p class="error" role="alert" id="actions-error">${error}</p>` : ''}
    ${
      p.share
        ? html`<div class="share-link"><label for="share-url">Public link</label><input id="share-url" readonly value="${p.share.url}">
          <a class="button secondary" href="${p.share.url}">Open</a></div>
          <form method="post" action="/speech/jobs/${p.id}/share/playback" id="share-playback">${csrfField(csrf)}<input type="hidden" name="playback" value="${p.share.playback ? '0' : '1'}">
            <p class="muted" id="share-playback-state" data-playback="${p.share.playback ? '1' : '0'}">${p.share.playback ? 'Readers of the link can play the recording.' : 'Readers of the link see the transcript only; the recording does not play there.'}</p>
            <button class="secondary" type="submit" id="share-playback-toggle">${p.share.playback ? 'Turn playback off on the public page' : 'Allow playback on the public page'}</button></form>
          <form method="post" action="/speech/jobs/${p.id}/share/disable" data-confirm="Disable the public link? It stops working at once.">${csrfField(csrf)}<button class="secondary" type="submit" id="share-disable">Stop sharing</button></form>`
        : job.status === 'completed'
          ? html`<form method="post" action="/speech/jobs/${p.id}/share">${csrfField(csrf)}<button type="submit" id="share-create">Create a public link</button>
            <span class="muted">Anyone with the link can read the transcript (no sign-in).</span></form>`
          : html`<p class="muted">A public link can be created once the transcript is completed.</p>`
    }
    <div class="actions">
      ${processing ? html`<form method="post" action="/speech/jobs/${p.id}/cancel">${csrfField(csrf)}<button class="secondary" type="submit" id="job-cancel">Cancel</button></form>` : ''}
      ${job.status === 'failed' || job.status === 'queued' ? html`<form method="post" action="/speech/jobs/${p.id}/restart">${csrfField(csrf)}<button class="secondary" type="submit" id="job-restart">Restart</button></form>` : ''}
      ${processing ? '' : html`<form method="post" action="/speech/jobs/${p.id}/delete" data-confirm="Delete this job, its transcript, history and media?">${csrfField(csrf)}<button class="danger" type="submit" id="job-delete">Delete</button></form>`}
    </div></div>`;
}

/** One option of the target selector (admins). */
export interface TargetOption {
  name: string;
  online: boolean;
  incompatible: string | null;
  mismatches: string[];
}

/**
 * Execution target (administrators): automatic, the local runner, or a named worker (offline ones
 * too). A fresh worker with a known claim-capability mismatch is listed as incompatible with the
 * reason and cannot be chosen; the API refuses it as well.
 */
export function targetCard(job: SpeechJob, options: TargetOption[], csrf: string, error: string | undefined): SafeHtml {
  const current = job.executionTarget === 'worker' ? `worker:${job.targetWorker?.name ?? ''}` : job.executionTarget;
  const opt = (value: string, label: string, disabled = false, reason = '') =>
    html`<option value="${value}" ${value === current ? new SafeHtml('selected') : ''} ${disabled ? new SafeHtml('disabled') : ''} data-reason="${reason}">${label}</option>`;
  return html`<div class="card" id="target"><h2>Execution target</h2>
    ${error ? html`<p class="error" role="alert" id="target-error">${error}</p>` : ''}
    <form method="post" action="/speech/jobs/${job.id}/target">${csrfField(csrf)}
      <label for="target-select">Run this job on</label>
      <select id="target-select" name="target">
        ${opt('auto', 'Automatic (any compatible worker)')}${opt('local', 'The local runner')}
        ${options.map((o) => {
          // The job's current target stays selectable (re-saving it is not a new choice).
          const blocked = o.incompatible !== null && current !== `worker:${o.name}`;
          const label = `${o.name} (${o.online ? 'online' : 'offline'})${o.incompatible ? ` — incompatible: ${o.incompatible}` : o.mismatches.length ? ` — forced: ${o.mismatches.join(', ')}` : ''}`;
          return opt(`worker:${o.name}`, label, blocked, o.incompatible ?? o.mismatches.join(', '));
        })}
      </select>
      <p class="hint" id="target-reason"></p>
      <button type="submit">Save target</button>
      <p class="hint">A named worker is an exact target: it never falls back to another runner, and may take the job despite model or diarization differences.</p>
    </form>
    ${
      options.some((o) => o.incompatible)
        ? html`<ul class="muted" id="incompatible-workers">${options.filter((o) => o.incompatible).map((o) => html`<li data-worker="${o.name}">${o.name}: incompatible — ${o.incompatible}</li>`)}</ul>`
        : ''
    }</div>`;
}

/**
 * The transcript of the current pass in the reading view (reading-view.ts): speaker turns, their
 * colours and timestamps, the search bar; segments arrive live over socket.io and are appended by
 * the same rules. Its notes are a slot of their own.
 */
export function transcriptCard(job: SpeechJob, segments: ReadingRow[], player: SafeHtml, styleNonce: string, owner: boolean): SafeHtml {
  return html`<section class="card transcript-card" id="transcript" aria-label="Transcript"><h2 class="visually-hidden">Transcript</h2>
    <div class="reading-head" nonce="${styleNonce}">${player}${readingTools({ editable: owner })}</div>
    <div id="segments" class="reading-text" data-job="${job.id}" data-pass="${job.currentPass}" data-attempt="${job.attempt}" data-names="${JSON.stringify(job.speakerLabels)}">${readingTurns(segments, job.speakerLabels)}</div>
    <div class="slot" data-card="transcript-notes">${transcriptNotes(job, segments)}</div></section>`;
}

/** The transcript's text alone (the reading turns), for the live page after a correction of it. */
export function readingCard(job: SpeechJob, segments: ReadingRow[]): SafeHtml {
  return readingTurns(segments, job.speakerLabels);
}

/**
 * Corrections of the transcript: the owner's edits of the current pass with their authors and
 * times (newest first), "Undo the latest correction", and how to correct (the page's script adds
 * the editor to the text). Earlier passes' corrections stay with them (undone and superseded ones too).
 */
export function editsCard(job: SpeechJob, owner: boolean, edits: EditRow[], csrf: string, error?: string): SafeHtml | '' {
  const current = edits.filter((e) => e.pass === job.currentPass);
  if (!owner && !current.length) return '';
  const stateText: Record<EditRow['state'], string> = { active: '', undone: 'undone', superseded: 'superseded by a new speaker identification' };
  return html`<div class="card" id="edits" data-count="${current.filter((e) => e.state === 'active').length}"><h2>Corrections</h2>
    ${error ? html`<p class="error" role="alert" id="edits-error">${error}</p>` : ''}
    ${owner && job.status === 'completed' ? html`<p class="hint" id="edit-hint">Click “Correct” above the transcript, then a segment to fix its text or move it (or the words you select in it) to another speaker.</p>` : ''}
    ${
      current.length
        ? html`<ol class="edit-list" reversed>${current.map(
            (e) =>
              html`<li data-edit="${e.id}" data-state="${e.state}"><span class="${e.state === 'active' ? '' : 'muted'}">${e.summary}</span> <span class="muted">· ${e.author_name} · <time datetime="${new Date(e.at_ms).toISOString()}">${formatStockholm(e.at_ms)}</time>${
                stateText[e.state] ? ` · ${stateText[e.state]}` : ''
              }</span></li>`,
          )}</ol>`
        : html`<p class="muted">No corrections.</p>`
    }
    ${
      owner && current.some((e) => e.state === 'active')
        ? html`<form method="post" action="/speech/jobs/${job.id}/edits/undo">${csrfField(csrf)}<button class="secondary" type="submit" id="edit-undo">Undo the latest correction</button></form>`
        : ''
    }</div>`;
}

/** Whether an analysis or translation last changed before the owner corrected the current pass. */
function outOfDate(job: SpeechJob, updatedAt: string | Date | null | undefined): boolean {
  if (!updatedAt || job.transcriptRevisedPass !== job.currentPass || !job.transcriptRevisedAt) return false;
  return new Date(updatedAt).getTime() < job.transcriptRevisedAt.getTime();
}

/**
 * The player of the job's retained media (reading-view.ts playerMarkup): none before a URL job's
 * media was downloaded, a note once the media was released.
 */
export function playerCard(job: SpeechJob): SafeHtml | '' {
  return playerMarkup({
    src: `/api/speech/jobs/${job.id}/media`,
    peaks: `/api/speech/jobs/${job.id}/peaks`,
    mime: job.sourceMime,
    mediaPath: job.mediaPath,
    released: job.mediaRetainedUntil !== null || job.sourceType === 'upload',
  });
}

/** Under the transcript: no speech in a completed pass, or a new attempt starting over. */
export function transcriptNotes(job: SpeechJob, segments: readonly unknown[]): SafeHtml | '' {
  if (job.status === 'completed' && !segments.length)
    return html`<p class="muted" id="no-speech">${NO_SPEECH_DETAIL}: the recording holds no words the engine could hear.</p>`;
  if (job.status === 'queued' && job.attempt > 0 && !segments.length)
    return html`<p class="muted" id="new-attempt">Waiting for the next attempt; the transcript starts over.</p>`;
  return '';
}

type AnalysisView = NonNullable<JobView['analysis']>;

/** An analysis result as HTML: the summary, key points, action items and topics. */
function analysisResult(r: AnalysisView['result'] | null | undefined): SafeHtml | '' {
  if (!r) return '';
  const list = (title: string, items: string[]) => (items.length ? html`<h3>${title}</h3><ul>${items.map((i) => html`<li>${i}</li>`)}</ul>` : '');
  return html`<p>${r.summary}</p>${list('Key points', r.key_points)}${list('Action items', r.action_items)}${
    r.topics.length ? html`<p class="muted">Topics: ${r.topics.join(', ')}</p>` : ''
  }`;
}

/** The Analysis card: its state, provider and result, and "Analyse again" (AI access, completed transcript). */
export function analysisCard(job: SpeechJob, p: JobView, mayAnalyze: boolean, csrf: string): SafeHtml {
  const analysis = p.analysis;
  const provider = analysis?.provider && analysis.provider !== 'none' ? html` <span class="muted">· ${analysis.provider}</span>` : '';
  return html`<div class="card" id="analysis" data-state="${analysis?.state ?? 'none'}"><h2>Analysis</h2>
    <p><span id="analysis-state">${analysis ? `${analysis.state}${analysis.language ? ` · ${languageName(analysis.language)}` : ''}` : 'not requested'}</span>${provider}</p>
    ${analysis?.error ? html`<p class="error">${analysis.error}</p>` : ''}
    ${analysis?.state === 'completed' && outOfDate(job, analysis.updated_at) ? html`<p class="warning" id="analysis-stale">Out of date: the transcript was corrected after this analysis.${mayAnalyze ? ' “Analyse again” brings it and the translations up to date.' : ''}</p>` : ''}
    <div id="analysis-result">${analysisResult(analysis?.result)}</div>
    ${mayAnalyze && job.status === 'completed' ? html`<button type="button" id="analyze" data-csrf="${csrf}">Analyse again</button> <span id="analyze-status" role="status"></span>` : ''}
  </div>`;
}

/** Translations of the transcript (and of its analysis), one per requested language. */
export function translationsCard(job: SpeechJob, p: JobView): SafeHtml {
  return html`<div class="card" id="translations"><h2>Translations</h2>${
    p.translations.length
      ? p.translations.map(
          (
            t,
          ) => html`<details data-language="${t.language}" data-state="${t.state}"><summary>${languageName(t.language)} · <span class="translation-state">${t.state}</span></summary>
          ${t.state === 'completed' && outOfDate(job, t.updated_at) ? html`<p class="warning translation-stale">Out of date: the transcript was corrected after this translation. “Analyse again” makes a new analysis and new translations.</p>` : ''}
          ${t.error ? html`<p class="error">${t.error}</p>` : ''}${t.text ? html`<p>${t.text}</p>` : ''}${t.analysis ? html`<h3>Analysis</h3>${analysisResult(t.analysis)}` : ''}</details>`,
        )
      : html`<p class="muted">${p.translation_target_languages.length ? `Requested: ${p.translation_target_languages.join(', ')}; none available yet.` : 'No translations.'}</p>`
  }</div>`;
}

/** The owner's metadata form (title, note); "Suggest title" only fills the field (nothing is saved until the form is). */
export function metadataCard(job: SpeechJob, aiActions: boolean, csrf: string): SafeHtml {
  return html`<div class="card"><h2>Title and note</h2>
    <form id="metadata-form" data-job="${job.id}" data-csrf="${csrf}">
      <label for="meta-title">Title</label><input id="meta-title" name="source_label" maxlength="300" value="${job.sourceLabel ?? ''}" placeholder="${job.sourceFilename ?? job.sourceUrl ?? ''}">
      ${aiActions && job.status === 'completed' ? html`<button type="button" id="suggest-title">Suggest title</button>` : ''}
      <label for="meta-note">Note</label><textarea id="meta-note" name="source_note" maxlength="5000" rows="3">${job.sourceNote ?? ''}</textarea>
      <button type="submit">Save</button> <span id="metadata-status" role="status"></span>
    </form></div>`;
}

/** The workflow log (`runtime_log[]`), times in Europe/Stockholm. */
export function runtimeLogCard(p: JobView): SafeHtml {
  return html`<div class="card" id="runtime-log"><h2>Runtime log</h2>${
    p.runtime_log.length
      ? html`<div class="table-wrap runtime-log"><table><thead><tr><th>Time</th><th>Event</th><th>Message</th></tr></thead><tbody>${p.runtime_log.map(
          (e) =>
            html`<tr data-level="${e.level}"><td data-label="Time"><time datetime="${e.at}">${formatStockholm(e.at)}</time></td><td data-label="Event">${e.event}</td><td data-label="Message">${e.message}</td></tr>`,
        )}</tbody></table></div>`
      : html`<p class="muted">Nothing logged yet.</p>`
  }</div>`;
}

const DIARIZATION_TEXT: Record<string, (d: PresentedDiarization) => string> = {
  pending: () => 'Waiting for a worker to identify the speakers.',
  running: () => 'Identifying speakers…',
  completed: (d) => `${d.speaker_count ?? 0} ${d.speaker_count === 1 ? 'speaker' : 'speakers'}${d.engine ? ` (${d.engine})` : ''}.`,
  failed: (d) => `Speaker identification failed${d.error ? `: ${d.error}` : '.'} The transcript is not affected.`,
  unavailable: (d) => `No speaker labels${d.error ? `: ${d.error}` : '.'}`,
  skipped: () => 'Speaker labels are off for this job.',
};

/**
 * The speaker count control of the submission form and the rerun form: "Speakers: detect / exactly
 * N / between A and B" (`speakers` picks which inputs count, see pageJobFieldsSchema). `prefix`
 * keeps the ids unique; `current` preselects a stated count.
 */
export function speakerCountControl(prefix: string, current: StatedSpeakers | null = null): SafeHtml {
  const mode = !current ? 'detect' : current.num_speakers !== undefined ? 'exact' : 'between';
  const radio = (value: string) =>
    html`<input type="radio" id="${prefix}-speakers-${value}" name="speakers" value="${value}" ${mode === value ? new SafeHtml('checked') : ''}>`;
  const num = (name: string, label: string, value: number | undefined) =>
    html`<input type="number" id="${prefix}-${name}" name="${name}" min="1" max="${MAX_STATED_SPEAKERS}" step="1" inputmode="numeric" class="speaker-count" aria-label="${label}" value="${value ?? ''}">`;
  return html`<fieldset class="speaker-counts" id="${prefix}-speakers"><legend>Speakers</legend>
    <label>${radio('detect')} detect</label>
    <label>${radio('exact')} exactly</label> ${num('num_speakers', 'Exact number of speakers', current?.num_speakers)}
    <label>${radio('between')} between</label> ${num('min_speakers', 'Fewest speakers', current?.min_speakers)} and ${num('max_speakers', 'Most speakers', current?.max_speakers)}
    <p class="hint">When you know how many people speak: exactly N, or a range (1 to ${MAX_STATED_SPEAKERS}).</p></fieldset>`;
}

/**
 * "Speakers": the diarization state, the speakers with their share of the talk, the speaker editor
 * (names, saved with the form) and the run / run-again action, for the owner. Works without script.
 */
export function speakersCard(job: SpeechJob, d: PresentedDiarization, owner: boolean, csrf: string, error: string | undefined): SafeHtml {
  const busy = d.state === 'pending' || d.state === 'running';
  const rerunnable = owner && job.status === 'completed' && !busy && job.mediaPath !== null;
  return html`<div class="card" id="speakers"><h2>Speakers</h2>
    ${error ? html`<p class="error" role="alert" id="speakers-error">${error}</p>` : ''}
    <p id="diarization-state" data-state="${d.state}">${DIARIZATION_TEXT[d.state]?.(d) ?? d.state}</p>
    ${d.requested_speakers ? html`<p class="muted" id="requested-speakers">Speakers stated: ${statedSpeakersText(d.requested_speakers)}.</p>` : ''}
    ${
      d.speakers.length
        ? owner && !busy
          ? html`<form method="post" action="/speech/jobs/${job.id}/speakers" id="speaker-editor">
        ${csrfField(csrf)}
        <div class="table-wrap"><table><thead><tr><th>Speaker</th><th>Name</th><th>Segments</th><th>Talk</th></tr></thead><tbody>
        ${d.speakers.map(
          (
            s,
          ) => html`<tr><td><span class="who ${speakerColourClass(s.key)}">${s.key}</span></td><td><input name="name_${s.key}" value="${s.renamed ? s.name : ''}" placeholder="${`Speaker ${s.key.slice(1)}`}" maxlength="60" aria-label="Name of ${s.key}"></td>
            <td>${s.segment_count}</td><td>${Math.round(s.seconds)} s</td></tr>`,
        )}
        </tbody></table></div>
        <button type="submit">Save names</button>
      </form>
      ${
        job.status === 'completed' && d.speakers.length > 1
          ? html`<form method="post" action="/speech/jobs/${job.id}/speakers/merge" id="speaker-merge" class="inline-fields">${csrfField(csrf)}
        <label for="merge-from">Merge</label><select id="merge-from" name="from">${d.speakers.map((s) => html`<option value="${s.key}">${s.name}</option>`)}</select>
        <label for="merge-into">into</label><select id="merge-into" name="into">${d.speakers.map((s, i) => html`<option value="${s.key}" ${i === 1 ? new SafeHtml('selected') : ''}>${s.name}</option>`)}</select>
        <button class="secondary" type="submit">Merge</button></form>`
          : ''
      }`
          : html`<ul>${d.speakers.map((s) => html`<li><span class="who ${speakerColourClass(s.key)}">${s.name}</span>: ${s.segment_count} segments, ${Math.round(s.seconds)} s</li>`)}</ul>`
        : ''
    }
    ${
      rerunnable
        ? html`<form method="post" action="/speech/jobs/${job.id}/diarization" id="diarization-rerun">
        ${csrfField(csrf)}
        ${speakerCountControl('rerun', d.requested_speakers)}
        <button type="submit">${d.state === 'completed' ? 'Identify speakers again' : 'Identify speakers'}</button>
        <span class="muted">The transcript stays as it is${d.state === 'completed' ? '; the new speakers replace these and their names' : ''}.</span>
      </form>`
        : ''
    }</div>`;
}

/** "Re-transcribe": the model choices when the caller may start a new pass, else why not. */
export function retranscriptionCard(state: RetranscriptionState, csrf: string, error: string | undefined): SafeHtml {
  const { job } = state;
  return html`<div class="card" id="retranscription"><h2>Re-transcribe</h2>
    ${error ? html`<p class="error" role="alert" id="retranscription-error">${error}</p>` : ''}
    ${
      state.canStart
        ? html`<form method="post" action="/speech/jobs/${job.id}/retranscription">
        ${csrfField(csrf)}
        <label for="retranscribe-model">Model of the new pass</label>
        <select id="retranscribe-model" name="model">${state.models.map((m) => html`<option value="${m}">${m}</option>`)}</select>
        <button type="submit">Re-transcribe</button>
        <p class="muted">The current pass (model ${job.model}) is kept below as a read-only revision.</p>
      </form>`
        : html`<p class="muted" id="retranscription-unavailable">${state.unavailableReason ?? ''}</p>`
    }</div>`;
}

/** Earlier passes, read-only: model, engine, completion time, transcript and the speaker-aware transcript. */
export function revisionsCard(state: RetranscriptionState): SafeHtml | '' {
  if (!state.revisions.length) return '';
  return html`<div class="card" id="revisions"><h2>Earlier passes</h2>
    ${state.revisions.map(({ revision: rev, segments }) => {
      const bySpeaker = speakerAwareTranscript(segments, rev.speakerLabels);
      const engine = rev.engine ? `${rev.engine}${rev.engineModel && rev.engineModel !== rev.engine ? ` (${rev.engineModel})` : ''}` : 'unknown engine';
      return html`<section class="revision" data-pass="${rev.pass}"><h3>Pass ${rev.pass} · model ${rev.model}</h3>
        <p class="muted">${engine}${rev.completedAt ? ` · completed ${formatStockholm(rev.completedAt)}` : ''} · archived ${formatStockholm(rev.archivedAt)}</p>
        ${rev.transcriptText?.trim() ? html`<p class="transcript">${rev.transcriptText}</p>` : html`<p class="muted">${NO_SPEECH_DETAIL}</p>`}
        ${bySpeaker ? html`<h4>By speaker</h4>${bySpeaker.split('\n\n').map((para) => html`<p class="speaker-turn">${para}</p>`)}` : ''}
      </section>`;
    })}</div>`;
}
