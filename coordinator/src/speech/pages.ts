import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { JOB_STATUS_LABELS } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import { hasPermission, type AuthRequirement, type AuthUser } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { AppError, normalizeError, okReasonBody, sendError, validationFailed } from '../http/errors.js';
import { html, layout, SafeHtml } from '../http/html.js';
import { NO_SPEECH_DETAIL, diarizationRecord, presentAnalysis, presentJob, presentTranslation } from './jobs/presenter.js';
import { JobService } from './jobs/job-service.js';
import { languageName } from './ai/work.js';
import type { RetranscriptionState } from './jobs/retranscription.js';
import { presentDiarization, speakerAwareTranscript, speakerName } from './jobs/speakers.js';
import type { SpeechJob, TranslationRow } from './jobs/entities.js';
import { SPEECH_RATE_LIMIT } from './policy.js';
import { RETRANSCRIPTION_STARTED } from './revisions-routes.js';

const speechUser: AuthRequirement = { accept: ['session'], permissions: ['speech.use'] };
const hidden = { hide: true } as const;
const jobParams = z.object({ jobId: z.coerce.number().int().positive().max(2_147_483_647) });

/** A request that asks for JSON rather than a page (a script's fetch with `Accept: application/json`). */
const wantsJson = (request: FastifyRequest) => {
  const accept = request.headers.accept ?? '';
  return accept.includes('application/json') && !accept.includes('text/html');
};

/** Notices a page may show after a redirect (`?notice=`): known codes only, never text from the URL. */
const NOTICES: Record<string, string> = {
  'retranscription-started': RETRANSCRIPTION_STARTED,
  'diarization-requested': 'Speaker identification requested: a worker with a diarizer runs it; the transcript stays as it is.',
  'speakers-saved': 'Speaker names saved.',
};

const fmtTime = (s: number) => {
  const m = Math.floor(s / 60);
  return `${String(m).padStart(2, '0')}:${(s - m * 60).toFixed(1).padStart(4, '0')}`;
};

// Times in the pages are shown in Europe/Stockholm, as the specification asks.
const stockholm = new Intl.DateTimeFormat('sv-SE', { timeZone: 'Europe/Stockholm', dateStyle: 'short', timeStyle: 'medium' });

/**
 * Browser pages of the speech queue: `/speech` (submit a URL or files, see your jobs) and
 * `/speech/jobs/{id}` (details and the transcript, with segments arriving live over socket.io).
 * Both work without JavaScript for reading; live updates and uploads use it.
 */
export async function speechPages(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { jobs } = deps.speech;

  app.setErrorHandler((error, request, reply) => {
    const e = normalizeError(error, request);
    // A script's request (the re-transcription action with Accept: application/json) gets the API's error shape.
    if (wantsJson(request)) return sendError(reply, e, okReasonBody);
    if (e.headers) void reply.headers(e.headers); // Retry-After of a 503
    if (e.reason === 'unauthenticated') return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 303);
    return reply
      .code(e.status)
      .type('text/html; charset=utf-8')
      .send(
        layout({
          title: 'Error',
          body: html`<div class="card"><h1>${e.status === 404 ? 'Not found' : 'Something went wrong'}</h1><p class="error">${e.message}</p><p><a href="/speech">Back to the queue</a></p></div>`,
        }),
      );
  });

  const page = (reply: FastifyReply, title: string, user: AuthUser, body: SafeHtml, script = '') =>
    reply.type('text/html; charset=utf-8').send(layout({ title, user, csrf: reply.generateCsrf(), body: html`${body}${script ? new SafeHtml(script) : ''}` }));

  // tus-js-client's browser build for the upload script of /speech (public, like any static asset).
  let tusClient: Promise<Buffer> | null = null;
  app.get('/speech/assets/tus.min.js', { schema: hidden, config: { auth: 'public' } }, async (_request, reply) => {
    tusClient ??= readFile(createRequire(import.meta.url).resolve('tus-js-client/dist/tus.min.js')).catch((err: unknown) => {
      tusClient = null;
      throw err;
    });
    return reply
      .type('text/javascript; charset=utf-8')
      .header('cache-control', 'public, max-age=86400')
      .send(await tusClient);
  });

  r.get('/speech', { schema: hidden, config: { auth: speechUser } }, async (request, reply) => {
    const user = userOf(request);
    const [list, availability] = await Promise.all([jobs.list(user, { limit: 100 }), deps.speech.models.snapshot()]);
    // Only models a registered worker serves; those no connected worker takes now say so.
    const models = availability.served();
    const connected = new Set(availability.connected());
    const csrf = reply.generateCsrf();
    const rows = list.map((j) => {
      const p = presentJob(j, { publicBaseUrl: deps.config.PUBLIC_BASE_URL, availability });
      return html`<tr><td><a href="/speech/jobs/${p.id}">${p.source_label}</a></td><td data-status>${p.status_label}</td>
        <td>${p.model}</td><td>${p.source_duration_human ?? ''}</td><td>${stockholm.format(j.createdAt)}</td></tr>`;
    });
    const body = html`<div class="card"><h1>Transcribe</h1>
      <form id="submit-form" data-csrf="${csrf}">
        <label for="source_url">Media or page URL</label><input id="source_url" name="source_url" type="url" placeholder="https://…">
        <label for="media_file">…or audio/video files (one job per file)</label><input id="media_file" name="media_file" type="file" multiple accept="audio/*,video/*">
        <label for="source_label">Title</label><input id="source_label" name="source_label" maxlength="300">
        <label for="model">Model</label><select id="model" name="model">${models.map((m) => html`<option value="${m}" ${m === deps.config.SPEECH_DEFAULT_MODEL ? new SafeHtml('selected') : ''}>${m}${connected.has(m) ? '' : ' (no worker connected)'}</option>`)}</select>
        ${models.length ? '' : html`<p class="muted" id="no-models">No worker has registered a model yet: start a worker agent (see the README) before queueing.</p>`}
        <label for="source_note">Note</label><textarea id="source_note" name="source_note" maxlength="5000" rows="2"></textarea>
        <label for="language">Language hint (empty: detect)</label><input id="language" name="language" maxlength="16" placeholder="en">
        <label for="analysis_language">Analysis language (empty: no analysis)</label><input id="analysis_language" name="analysis_language" maxlength="16" placeholder="en">
        <label for="translation_target_languages">Translate into (comma-separated)</label><input id="translation_target_languages" name="translation_target_languages" maxlength="400" placeholder="de, fr">
        <div class="checks"><label><input type="checkbox" name="disable_diarization" value="1"> Skip speaker labels</label></div>
        <button type="submit">Queue</button> <span id="submit-status" role="status"></span>
      </form></div>
      <div class="card"><h2>Your jobs</h2>${rows.length ? html`<table><thead><tr><th>Title</th><th>Status</th><th>Model</th><th>Length</th><th>Queued</th></tr></thead><tbody>${rows}</tbody></table>` : html`<p class="muted">No jobs yet.</p>`}</div>`;
    return page(reply, 'Speech queue', user, body, QUEUE_SCRIPT);
  });

  /** The job page; `error` is a refused re-transcription of the no-script form (shown with a 422). */
  async function jobPage(
    request: FastifyRequest,
    reply: FastifyReply,
    jobId: number,
    opts: { notice?: string | undefined; error?: string; speakersError?: string } = {},
  ) {
    const user = userOf(request);
    const state = await deps.speech.retranscription.state(user, jobId);
    const { job } = state;
    const p = presentJob(job, { publicBaseUrl: deps.config.PUBLIC_BASE_URL, availability: await deps.speech.models.snapshot() });
    const segments = await jobs.segments(job.id, job.currentPass);
    const diarization = presentDiarization(diarizationRecord(job), job.speakerLabels, (await jobs.detail(job)).speakerStats);
    const csrf = reply.generateCsrf();
    const notice = opts.notice ? NOTICES[opts.notice] : undefined;
    const translations = await jobs.translations(job.id, job.currentPass);
    const aiActions = deps.speech.ai !== null && hasPermission(user, 'provider_openai');
    const owner = job.owner.id === user.id;
    const body = html`${notice ? html`<div class="card" role="status" id="notice"><p>${notice}</p></div>` : ''}<div class="card"><h1>${p.source_label}</h1>
      <p><strong id="job-status" data-status="${p.status}">${JOB_STATUS_LABELS[job.status]}</strong> · <span id="job-stage">${p.stage_label ?? ''}</span>${p.stage_detail ? html` · <span id="job-detail">${p.stage_detail}</span>` : ''}</p>
      <p class="muted">Model ${p.model}${job.currentPass > 1 ? ` · pass ${job.currentPass}` : ''}${p.source_duration_human ? ` · ${p.source_duration_human}` : ''} · queued ${stockholm.format(job.createdAt)}</p>
      ${p.failure_error ? html`<p class="error">${p.failure_error}</p>` : ''}</div>
      <div class="card"><h2>Transcript</h2><ol id="segments" data-job="${job.id}" data-pass="${job.currentPass}">
        ${segments.map(
          (s) =>
            html`<li data-seq="${s.seq}"><span class="muted">${fmtTime(s.startSeconds)}</span> <span class="who" data-speaker="${s.speaker ?? ''}">${s.speaker ? speakerName(s.speaker, job.speakerLabels) : ''}</span> ${s.text}</li>`,
        )}
      </ol>${job.status === 'completed' && !segments.length ? html`<p class="muted" id="no-speech">${NO_SPEECH_DETAIL}: the recording holds no words the engine could hear.</p>` : ''}</div>
      ${speakersCard(job, diarization, job.owner.id === user.id, csrf, opts.speakersError)}
      ${analysisCard(job, translations, aiActions && (owner || JobService.canManageAll(user)), csrf)}${owner ? metadataCard(job, aiActions, csrf) : ''}
      ${retranscriptionCard(state, csrf, opts.error)}${revisionsCard(state)}`;
    return page(reply, p.source_label, user, body, JOB_SCRIPT + AI_SCRIPT);
  }

  r.get(
    '/speech/jobs/:jobId',
    {
      schema: { ...hidden, params: jobParams, querystring: z.object({ notice: z.string().max(60).optional() }) },
      config: { auth: speechUser },
    },
    async (request, reply) => jobPage(request, reply, request.params.jobId, { notice: request.query.notice }),
  );

  /**
   * The browser re-transcription action (session plus CSRF: the form's `_csrf` field or the
   * X-CSRF-Token header), with the rules of POST /api/speech/jobs/{jobId}/retranscribe. A form post
   * is redirected (303) to the job page with a notice, or the page is shown again with the refusal
   * (422); a request that accepts only JSON gets `{ok, message, job}` or the API's error body.
   */
  r.post(
    '/speech/jobs/:jobId/retranscription',
    {
      schema: { ...hidden, params: jobParams, body: z.object({ _csrf: z.string().max(200).optional(), model: z.string().max(200).optional() }).optional() },
      config: { auth: speechUser, rateLimit: SPEECH_RATE_LIMIT },
    },
    async (request, reply) => {
      const { jobId } = request.params;
      const model = request.body?.model?.trim() ?? '';
      let job;
      try {
        if (!model) throw validationFailed({ model: ['choose the model of the new pass'] });
        job = await deps.speech.retranscription.start(userOf(request), jobId, model);
      } catch (err) {
        if (!wantsJson(request) && err instanceof AppError && (err.reason === 'validation_failed' || err.reason === 'conflict'))
          return jobPage(request, reply.code(422), jobId, { error: err.message });
        throw err;
      }
      if (wantsJson(request)) {
        return reply.send({ ok: true as const, message: RETRANSCRIPTION_STARTED, job: presentJob(job, { publicBaseUrl: deps.config.PUBLIC_BASE_URL }) });
      }
      return reply.redirect(`/speech/jobs/${job.id}?notice=retranscription-started`, 303);
    },
  );

  /**
   * The job page's speaker forms (session plus CSRF), with the rules of the diarization API: run or
   * re-run speaker identification, and save speaker names (`name_S1`, `name_S2`, …; empty: "Speaker N").
   * A form post is redirected (303) to the job page with a notice, or the page is shown again with
   * the refusal (422).
   */
  const speakerAction =
    (action: (user: AuthUser, jobId: number, body: Record<string, string | undefined>) => Promise<unknown>, notice: string) =>
    async (request: FastifyRequest<{ Params: { jobId: number }; Body: Record<string, string | undefined> | undefined }>, reply: FastifyReply) => {
      const { jobId } = request.params;
      try {
        await action(userOf(request), jobId, request.body ?? {});
      } catch (err) {
        if (err instanceof AppError && err.reason === 'validation_failed') return jobPage(request, reply.code(422), jobId, { speakersError: err.message });
        throw err;
      }
      return reply.redirect(`/speech/jobs/${jobId}?notice=${notice}`, 303);
    };
  const speakerForm = z.record(z.string().regex(/^(_csrf|name_S[1-9][0-9]{0,3})$/), z.string().max(200)).optional();

  r.post(
    '/speech/jobs/:jobId/diarization',
    { schema: { ...hidden, params: jobParams, body: speakerForm }, config: { auth: speechUser, rateLimit: SPEECH_RATE_LIMIT } },
    speakerAction((user, jobId) => deps.speech.diarization.rerun(user, jobId), 'diarization-requested'),
  );

  r.post(
    '/speech/jobs/:jobId/speakers',
    { schema: { ...hidden, params: jobParams, body: speakerForm }, config: { auth: speechUser, rateLimit: SPEECH_RATE_LIMIT } },
    speakerAction((user, jobId, body) => {
      const names = Object.fromEntries(
        Object.entries(body)
          .filter(([k]) => k.startsWith('name_'))
          .map(([k, v]) => [k.slice('name_'.length), (v ?? '').trim().slice(0, 60)]),
      );
      if (!Object.keys(names).length) throw validationFailed({ speakers: ['no speaker names were sent'] });
      return deps.speech.diarization.rename(user, jobId, names);
    }, 'speakers-saved'),
  );
}

type PresentedDiarization = ReturnType<typeof presentDiarization>;

const DIARIZATION_TEXT: Record<string, (d: PresentedDiarization) => string> = {
  pending: () => 'Waiting for a worker to identify the speakers.',
  running: () => 'Identifying speakers…',
  completed: (d) => `${d.speaker_count ?? 0} ${d.speaker_count === 1 ? 'speaker' : 'speakers'}${d.engine ? ` (${d.engine})` : ''}.`,
  failed: (d) => `Speaker identification failed${d.error ? `: ${d.error}` : '.'} The transcript is not affected.`,
  unavailable: (d) => `No speaker labels${d.error ? `: ${d.error}` : '.'}`,
  skipped: () => 'Speaker labels are off for this job.',
};

/**
 * "Speakers": the diarization state, the speakers with their share of the talk, the speaker editor
 * (names, saved with the form) and the run / run-again action, for the owner. Works without script.
 */
function speakersCard(job: SpeechJob, d: PresentedDiarization, owner: boolean, csrf: string, error: string | undefined): SafeHtml {
  const busy = d.state === 'pending' || d.state === 'running';
  const rerunnable = owner && job.status === 'completed' && !busy && job.mediaPath !== null;
  return html`<div class="card" id="speakers"><h2>Speakers</h2>
    ${error ? html`<p class="error" role="alert" id="speakers-error">${error}</p>` : ''}
    <p id="diarization-state" data-state="${d.state}">${DIARIZATION_TEXT[d.state]?.(d) ?? d.state}</p>
    ${
      d.speakers.length
        ? owner && !busy
          ? html`<form method="post" action="/speech/jobs/${job.id}/speakers" id="speaker-editor">
        <input type="hidden" name="_csrf" value="${csrf}">
        <table><thead><tr><th>Speaker</th><th>Name</th><th>Segments</th><th>Talk</th></tr></thead><tbody>
        ${d.speakers.map(
          (
            s,
          ) => html`<tr><td>${s.key}</td><td><input name="name_${s.key}" value="${s.renamed ? s.name : ''}" placeholder="${`Speaker ${s.key.slice(1)}`}" maxlength="60" aria-label="Name of ${s.key}"></td>
            <td>${s.segment_count}</td><td>${Math.round(s.seconds)} s</td></tr>`,
        )}
        </tbody></table>
        <button type="submit">Save names</button>
      </form>`
          : html`<ul>${d.speakers.map((s) => html`<li>${s.name}: ${s.segment_count} segments, ${Math.round(s.seconds)} s</li>`)}</ul>`
        : ''
    }
    ${
      rerunnable
        ? html`<form method="post" action="/speech/jobs/${job.id}/diarization" id="diarization-rerun">
        <input type="hidden" name="_csrf" value="${csrf}">
        <button type="submit">${d.state === 'completed' ? 'Identify speakers again' : 'Identify speakers'}</button>
        <span class="muted">The transcript stays as it is${d.state === 'completed' ? '; the new speakers replace these and their names' : ''}.</span>
      </form>`
        : ''
    }</div>`;
}

/** "Re-transcribe": the model choices when the caller may start a new pass, else why not. */
/** An analysis result as HTML: the summary, key points, action items and topics. */
function analysisResult(r: ReturnType<typeof presentAnalysis> extends infer A ? (A extends { result: infer R } ? R : never) : never): SafeHtml | '' {
  if (!r) return '';
  const list = (title: string, items: string[]) => (items.length ? html`<h3>${title}</h3><ul>${items.map((i) => html`<li>${i}</li>`)}</ul>` : '');
  return html`<p>${r.summary}</p>${list('Key points', r.key_points)}${list('Action items', r.action_items)}${
    r.topics.length ? html`<p class="muted">Topics: ${r.topics.join(', ')}</p>` : ''
  }`;
}

/** The Analysis card: its state and result, "Analyse again" (AI access, completed transcript), and the translations. */
function analysisCard(job: SpeechJob, translations: TranslationRow[], mayAnalyze: boolean, csrf: string): SafeHtml {
  const analysis = presentAnalysis(job.analysis);
  const provider = analysis?.provider && analysis.provider !== 'none' ? html` <span class="muted">· ${analysis.provider}</span>` : '';
  return html`<div class="card" id="analysis" data-state="${analysis?.state ?? 'none'}"><h2>Analysis</h2>
    <p><span id="analysis-state">${analysis ? `${analysis.state}${analysis.language ? ` · ${languageName(analysis.language)}` : ''}` : 'not requested'}</span>${provider}</p>
    ${analysis?.error ? html`<p class="error">${analysis.error}</p>` : ''}
    <div id="analysis-result">${analysisResult(analysis?.result ?? null)}</div>
    ${mayAnalyze && job.status === 'completed' ? html`<button type="button" id="analyze" data-csrf="${csrf}">Analyse again</button> <span id="analyze-status" role="status"></span>` : ''}
    ${
      translations.length
        ? html`<h2>Translations</h2>${translations.map(presentTranslation).map(
            (
              t,
            ) => html`<details data-language="${t.language}" data-state="${t.state}"><summary>${languageName(t.language)} · <span class="translation-state">${t.state}</span></summary>
          ${t.error ? html`<p class="error">${t.error}</p>` : ''}${t.text ? html`<p>${t.text}</p>` : ''}${t.analysis ? html`<h3>Analysis</h3>${analysisResult(t.analysis)}` : ''}</details>`,
          )}`
        : ''
    }</div>`;
}

/** The owner's metadata form (title, note); "Suggest title" only fills the field (spec "Titles"). */
function metadataCard(job: SpeechJob, aiActions: boolean, csrf: string): SafeHtml {
  return html`<div class="card"><h2>Title and note</h2>
    <form id="metadata-form" data-job="${job.id}" data-csrf="${csrf}">
      <label for="meta-title">Title</label><input id="meta-title" name="source_label" maxlength="300" value="${job.sourceLabel ?? ''}" placeholder="${job.sourceFilename ?? job.sourceUrl ?? ''}">
      ${aiActions && job.status === 'completed' ? html`<button type="button" id="suggest-title">Suggest title</button>` : ''}
      <label for="meta-note">Note</label><textarea id="meta-note" name="source_note" maxlength="5000" rows="3">${job.sourceNote ?? ''}</textarea>
      <button type="submit">Save</button> <span id="metadata-status" role="status"></span>
    </form></div>`;
}

function retranscriptionCard(state: RetranscriptionState, csrf: string, error: string | undefined): SafeHtml {
  const { job } = state;
  return html`<div class="card" id="retranscription"><h2>Re-transcribe</h2>
    ${error ? html`<p class="error" role="alert" id="retranscription-error">${error}</p>` : ''}
    ${
      state.canStart
        ? html`<form method="post" action="/speech/jobs/${job.id}/retranscription">
        <input type="hidden" name="_csrf" value="${csrf}">
        <label for="retranscribe-model">Model of the new pass</label>
        <select id="retranscribe-model" name="model">${state.models.map((m) => html`<option value="${m}">${m}</option>`)}</select>
        <button type="submit">Re-transcribe</button>
        <p class="muted">The current pass (model ${job.model}) is kept below as a read-only revision.</p>
      </form>`
        : html`<p class="muted" id="retranscription-unavailable">${state.unavailableReason ?? ''}</p>`
    }</div>`;
}

/** Earlier passes, read-only: model, engine, completion time, transcript and the speaker-aware transcript. */
function revisionsCard(state: RetranscriptionState): SafeHtml | '' {
  if (!state.revisions.length) return '';
  return html`<div class="card" id="revisions"><h2>Earlier passes</h2>
    ${state.revisions.map(({ revision: rev, segments }) => {
      const bySpeaker = speakerAwareTranscript(segments, rev.speakerLabels);
      const engine = rev.engine ? `${rev.engine}${rev.engineModel && rev.engineModel !== rev.engine ? ` (${rev.engineModel})` : ''}` : 'unknown engine';
      return html`<section class="revision" data-pass="${rev.pass}"><h3>Pass ${rev.pass} · model ${rev.model}</h3>
        <p class="muted">${engine}${rev.completedAt ? ` · completed ${stockholm.format(rev.completedAt)}` : ''} · archived ${stockholm.format(rev.archivedAt)}</p>
        ${rev.transcriptText?.trim() ? html`<p class="transcript">${rev.transcriptText}</p>` : html`<p class="muted">${NO_SPEECH_DETAIL}</p>`}
        ${bySpeaker ? html`<h4>By speaker</h4>${bySpeaker.split('\n\n').map((para) => html`<p class="speaker-turn">${para}</p>`)}` : ''}
      </section>`;
    })}</div>`;
}

/** Live updates: subscribe, then apply each segment once by its seq (snapshot and live events may overlap). */
const JOB_SCRIPT = `<script src="/socket.io/socket.io.js"></script><script>
(() => {
  const list = document.getElementById('segments');
  const jobId = Number(list.dataset.job);
  const seen = new Set([...list.querySelectorAll('li')].map((li) => Number(li.dataset.seq)));
  const fmt = (s) => { const m = Math.floor(s / 60); return String(m).padStart(2, '0') + ':' + (s - m * 60).toFixed(1).padStart(4, '0'); };
  const add = (s) => {
    if (seen.has(s.seq)) return;
    seen.add(s.seq);
    const li = document.createElement('li');
    li.dataset.seq = s.seq;
    const t = document.createElement('span'); t.className = 'muted'; t.textContent = fmt(s.start);
    const w = document.createElement('span'); w.className = 'who'; w.dataset.speaker = s.speaker || '';
    if (s.speaker) w.textContent = 'Speaker ' + s.speaker.slice(1);
    li.append(t, ' ', w, ' ' + s.text);
    const after = [...list.children].find((x) => Number(x.dataset.seq) > s.seq);
    list.insertBefore(li, after || null);
  };
  const socket = io({ transports: ['websocket', 'polling'] });
  socket.on('connect', () => socket.emit('subscribe', { jobId }));
  socket.on('snapshot', (snap) => snap.segments.forEach(add));
  socket.on('segment', add);
  socket.on('analysis', (ev) => document.dispatchEvent(new CustomEvent('sonar:analysis', { detail: ev })));
  socket.on('status', (st) => {
    const el = document.getElementById('job-status');
    el.textContent = st.status_label; el.dataset.status = st.status;
    document.getElementById('job-stage').textContent = st.stage_label || '';
  });
  // Speaker identification started or ended: its state, and (when it ended) each segment's speaker.
  const texts = { pending: 'Waiting for a worker to identify the speakers.', running: 'Identifying speakers…',
    completed: 'Speakers identified; reload the page to name them.', failed: 'Speaker identification failed; reload the page for the reason.',
    unavailable: 'No speaker labels; reload the page for the reason.' };
  socket.on('diarization', (d) => {
    const el = document.getElementById('diarization-state');
    if (el) { el.textContent = texts[d.state] || d.state; el.dataset.state = d.state; }
    for (const s of d.speakers || []) {
      const who = list.querySelector('li[data-seq="' + s.seq + '"] .who');
      if (who) { who.dataset.speaker = s.speaker; who.textContent = 'Speaker ' + s.speaker.slice(1); }
    }
  });
})();
</script>`;

/**
 * The metadata form (title, note) saves with PATCH /api/speech/jobs/{id}; "Suggest title" only
 * fills the title field (saved with the form, spec "Titles"). Live `analysis` events update the
 * states shown; when one ends the page is read again from the API for the result.
 */
const AI_SCRIPT = `<script>
(() => {
  const form = document.getElementById('metadata-form');
  const jobId = Number(document.getElementById('segments').dataset.job);
  const say = (id, text) => { const el = document.getElementById(id); if (el) el.textContent = text; };
  const call = async (method, url, csrf, body) => {
    const res = await fetch(url, { method, headers: Object.assign({ 'x-csrf-token': csrf, accept: 'application/json' }, body ? { 'content-type': 'application/json' } : {}), body: body ? JSON.stringify(body) : undefined });
    const json = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(json.message || ('HTTP ' + res.status));
    return json;
  };
  if (form) {
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      say('metadata-status', 'Saving…');
      try {
        await call('PATCH', '/api/speech/jobs/' + jobId, form.dataset.csrf, { source_label: form.source_label.value, source_note: form.source_note.value });
        say('metadata-status', 'Saved.');
      } catch (e) { say('metadata-status', e.message); }
    });
    const suggest = document.getElementById('suggest-title');
    if (suggest) suggest.addEventListener('click', async () => {
      say('metadata-status', 'Asking for a title…');
      try {
        const json = await call('POST', '/api/speech/jobs/' + jobId + '/title-suggestion', form.dataset.csrf);
        form.source_label.value = json.title;
        say('metadata-status', 'Suggested; save to keep it.');
      } catch (e) { say('metadata-status', e.message); }
    });
  }
  const analyze = document.getElementById('analyze');
  if (analyze) analyze.addEventListener('click', async () => {
    try { await call('POST', '/api/speech/jobs/' + jobId + '/analyze', analyze.dataset.csrf); say('analyze-status', 'Queued.'); }
    catch (e) { say('analyze-status', e.message); }
  });
  const card = document.getElementById('analysis');
  const render = (r) => {
    const box = document.getElementById('analysis-result');
    box.replaceChildren();
    if (!r) return;
    const p = document.createElement('p'); p.textContent = r.summary; box.append(p);
    for (const [title, items] of [['Key points', r.key_points], ['Action items', r.action_items]]) {
      if (!items.length) continue;
      const h = document.createElement('h3'); h.textContent = title;
      const ul = document.createElement('ul');
      for (const i of items) { const li = document.createElement('li'); li.textContent = i; ul.append(li); }
      box.append(h, ul);
    }
  };
  document.addEventListener('sonar:analysis', async (e) => {
    const ev = e.detail;
    if (ev.kind === 'analysis') { card.dataset.state = ev.state; say('analysis-state', ev.state); }
    if (ev.kind === 'translation') {
      const d = card.querySelector('details[data-language="' + ev.language + '"]');
      if (d) { d.dataset.state = ev.state; d.querySelector('.translation-state').textContent = ev.state; }
    }
    if (ev.kind === 'title' && ev.title && form && !form.source_label.matches(':focus')) form.source_label.value = ev.title;
    if (ev.kind === 'analysis' && ev.state === 'completed') {
      const res = await fetch('/api/speech/jobs/' + jobId, { headers: { accept: 'application/json' } });
      if (res.ok) render((await res.json()).job.analysis.result);
    }
  });
})();
</script>`;

/**
 * Multi-file submission is client-side batching: one upload and one job per file, same settings
 * (spec Submission rule 1). Files go through the resumable tus endpoint (tus-js-client): the upload
 * URL is remembered per file fingerprint in localStorage, so a later attempt with the same file
 * resumes where the server's offset is; a failed connection is retried once automatically, and
 * only the bytes the server does not have are sent again (Submission rule 5).
 */
const QUEUE_SCRIPT = `<script src="/speech/assets/tus.min.js"></script><script>
(() => {
  const form = document.getElementById('submit-form');
  const status = document.getElementById('submit-status');
  const csrf = form.dataset.csrf;
  const errorText = (err) => {
    const res = err && err.originalResponse;
    if (res) {
      try { const body = JSON.parse(res.getBody()); if (body && body.message) return body.message; } catch (e) { /* not JSON */ }
      const text = (res.getBody() || '').trim();
      return text || ('HTTP ' + res.getStatus());
    }
    return (err && err.message) || String(err);
  };
  const uploadFile = (file, common) => new Promise((resolve, reject) => {
    const upload = new tus.Upload(file, {
      endpoint: '/api/speech/uploads',
      chunkSize: 32 * 1024 * 1024,
      retryDelays: [1000],
      headers: { 'X-CSRF-Token': csrf },
      metadata: Object.assign({ filename: file.name, filetype: file.type || 'application/octet-stream' }, common),
      storeFingerprintForResuming: true,
      removeFingerprintOnSuccess: true,
      onProgress: (sent, total) => { status.textContent = file.name + ': ' + Math.floor((sent / total) * 100) + '%'; },
      onSuccess: async (payload) => {
        const id = payload && payload.lastResponse && payload.lastResponse.getHeader('X-Sonar-Job-Id');
        if (id) return resolve({ id: Number(id) });
        // The final response was lost: the server remembers which job the upload queued.
        try {
          const res = await fetch(upload.url + '/job', { headers: { accept: 'application/json' } });
          const json = await res.json();
          if (!res.ok) throw new Error(json.message || ('HTTP ' + res.status));
          resolve(json.job);
        } catch (e) { reject(e); }
      },
      onError: (err) => reject(new Error(errorText(err))),
    });
    upload.findPreviousUploads().then((previous) => {
      if (previous.length) upload.resumeFromPreviousUpload(previous[0]);
      upload.start();
    }, reject);
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const data = new FormData(form);
    const files = [...form.media_file.files];
    const common = {};
    for (const k of ['source_label', 'source_note', 'model', 'language', 'analysis_language', 'translation_target_languages']) if (data.get(k)) common[k] = String(data.get(k));
    if (data.get('disable_diarization')) common.disable_diarization = '1';
    const results = [];
    const failures = [];
    try {
      if (files.length === 0) {
        const res = await fetch('/api/speech/jobs', {
          method: 'POST',
          headers: { 'x-csrf-token': csrf, 'content-type': 'application/json' },
          body: JSON.stringify({ ...common, source_url: data.get('source_url') }),
        });
        const json = await res.json().catch(() => ({}));
        if (!res.ok) throw new Error(json.message || ('HTTP ' + res.status));
        results.push(json.job);
      }
      for (const file of files) {
        try { results.push(await uploadFile(file, common)); } catch (e) { failures.push(file.name + ': ' + e.message); }
      }
      if (failures.length) { status.textContent = failures.join('; '); if (results.length) setTimeout(() => location.reload(), 4000); return; }
      if (results.length === 1) location.href = '/speech/jobs/' + results[0].id; else location.reload();
    } catch (e) { status.textContent = e.message; }
  });
})();
</script>`;
