import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { JOB_PAGE_CARDS, SWAPPABLE_JOB_PAGE_CARDS, formatStockholm, type JobPageCard, idParam } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import { hasPermission, type AuthRequirement, type AuthUser } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { AppError, normalizeError, okReasonBody, sendError, validationFailed } from '../http/errors.js';
import { html, SafeHtml } from '../http/html.js';
import { pageErrorHandler, sendPage } from '../http/page.js';
import { uploadLimits } from './host-limits.js';
import { EditService } from './jobs/edit-service.js';
import { localWorkerProblem } from './local-worker-status.js';
import { JobService } from './jobs/job-service.js';
import { diarizationRecord, presentJob, presentJobDetail } from './jobs/presenter.js';
import { presentDiarization } from './jobs/speakers.js';
import { SPEECH_PAGE_RATE_LIMIT } from './policy.js';
import { RETRANSCRIPTION_STARTED } from './revisions-routes.js';
import { pageJobFieldsSchema, pageRerunSchema } from './schemas.js';
import type { ShareService } from './shares/share-service.js';
import { createSubmittedJob, emptyBodyForMultipart, jobSettings, readSubmission } from './submission.js';
import { targetIncompatibility, targetMismatches } from './workers/compatibility.js';
import {
  actionsCard,
  analysisCard,
  downloadsCard,
  factsCard,
  playerCard,
  readingCard,
  editsCard,
  livenessCard,
  retranscriptionCard,
  revisionsCard,
  runtimeLogCard,
  speakersCard,
  speakerCountControl,
  summaryCard,
  targetCard,
  transcriptCard,
  translationsCard,
  metadataCard,
  workerCard,
  transcriptNotes,
  type TargetOption,
} from './job-page.js';

const speechUser: AuthRequirement = { accept: ['session'], permissions: ['speech.use'] };
const speechAdmin: AuthRequirement = { accept: ['session'], adminOnly: true };
const hidden = { hide: true } as const;
const jobParams = z.object({ jobId: idParam() });
const csrfOnly = z.object({ _csrf: z.string().max(200).optional() }).optional();

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
  queued: 'Job queued.',
  'cancel-requested': 'Cancellation requested: the worker stops at its next heartbeat.',
  restarted: 'Job queued again; the transcript starts over with the next attempt.',
  deleted: 'Job deleted.',
  'share-created': 'Public link created.',
  'share-disabled': 'Public link disabled: it no longer works.',
  'share-playback': 'Playback on the public page changed.',
  'speakers-merged': 'Speakers merged.',
  'edit-undone': 'Correction undone.',
  'target-saved': 'Execution target saved.',
};

const noticeCard = (code: string | undefined) => {
  const text = code ? NOTICES[code] : undefined;
  return text ? html`<div class="card notice" role="status" id="notice"><p>${text}</p></div>` : '';
};

/**
 * Browser pages of the speech queue: `/speech` (submit a URL or files, see your jobs, live status)
 * and `/speech/jobs/{id}` (status, liveness, worker, transcript with live segments, downloads,
 * sharing, actions, speakers, re-transcription, earlier passes, runtime log). Both read without
 * JavaScript, and every form posts without it (files one per post without script; the page's
 * module uploads several, resumably).
 */
export async function speechPages(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech' | 'workers'>, shares: ShareService) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const edits = new EditService(deps.speech.jobs, deps.speech.repo);
  const { jobs } = deps.speech;
  const publicBaseUrl = deps.config.PUBLIC_BASE_URL;

  app.setErrorHandler((error, request, reply) => {
    const e = normalizeError(error, request);
    // A script's request (the re-transcription action with Accept: application/json) gets the API's error shape.
    if (wantsJson(request)) return sendError(reply, e, okReasonBody);
    return pageErrorHandler(request, reply, e);
  });

  /** The queue page; `error` is a refused no-script submission (shown with a 422). */
  async function queuePage(request: FastifyRequest, reply: FastifyReply, opts: { notice?: string | undefined; error?: string } = {}) {
    const user = userOf(request);
    const [list, availability] = await Promise.all([jobs.list(user, { limit: 100 }), deps.speech.models.snapshot()]);
    // Only models a registered worker serves; those no connected worker takes now say so.
    const models = availability.served();
    const connected = new Set(availability.connected());
    const csrf = reply.generateCsrf();
    const limits = uploadLimits(deps.config);
    const rows = list.map((j) => {
      const p = presentJob(j, { publicBaseUrl, availability });
      return html`<tr data-job="${p.id}"><td data-label="Title"><a href="/speech/jobs/${p.id}">${p.source_label}</a></td><td data-label="Status"><span class="badge" data-status="${p.status}">${p.status_label}</span></td>
        <td data-stage data-label="Stage">${p.stage_label && p.stage_label !== p.status_label ? p.stage_label : ''}</td><td data-label="Model">${p.model}</td><td data-label="Length">${p.source_duration_human ?? ''}</td><td data-label="Queued"><time datetime="${p.created_at}">${formatStockholm(j.createdAt)}</time></td></tr>`;
    });
    const problem = localWorkerProblem();
    const body = html`${noticeCard(opts.notice)}${problem ? html`<div class="card warning" role="alert" id="local-worker-problem"><p>${problem}</p></div>` : ''}<div class="card"><h1>Transcribe</h1>
      ${opts.error ? html`<p class="error" role="alert" id="submit-error">${opts.error}</p>` : ''}
      <form id="submit-form" method="post" action="/speech?_csrf=${encodeURIComponent(csrf)}" enctype="multipart/form-data" data-csrf="${csrf}" data-max-bytes="${limits.effectiveBytes}">
        <input type="hidden" name="_csrf" value="${csrf}">
        <div class="grid2">
          <div><label for="source_url">Media or page URL</label><input id="source_url" name="source_url" type="url" placeholder="https://…"></div>
          <div><label for="media_file">…or an audio/video file</label><input id="media_file" name="media_file" type="file" accept="audio/*,video/*">
            <p class="hint" id="media-hint">Up to ${limits.effective_max_label} per file. With JavaScript you can pick several: one job per file.</p></div>
        </div>
        <label for="source_label">Title</label><input id="source_label" name="source_label" maxlength="300" placeholder="Defaults to the file name">
        <label for="source_note">Note</label><textarea id="source_note" name="source_note" maxlength="5000" placeholder="Anything worth remembering about this recording"></textarea>
        <div class="grid2">
          <div><label for="model">Model</label><select id="model" name="model">${models.map((m) => html`<option value="${m}" ${m === deps.config.SPEECH_DEFAULT_MODEL ? new SafeHtml('selected') : ''}>${m}${connected.has(m) ? '' : ' (no worker connected)'}</option>`)}</select>
            ${models.length ? '' : html`<p class="hint" id="no-models">No worker has registered a model yet: start a worker agent (see the README) before queueing.</p>`}</div>
          <div><label for="language">Language hint</label><input id="language" name="language" maxlength="16" placeholder="detect" title="Empty: the engine detects the language; or a code such as en or sv"></div>
          ${
            deps.speech.ai
              ? html`<div><label for="analysis_language">Analysis language</label><input id="analysis_language" name="analysis_language" maxlength="16" placeholder="e.g. en"></div>
          <div><label for="translation_target_languages">Translate into</label><input id="translation_target_languages" name="translation_target_languages" maxlength="400" placeholder="comma-separated, e.g. sv, de"></div>`
              : ''
          }
        </div>
        ${deps.speech.ai ? '' : html`<p class="hint" id="no-ai-provider">Analysis and translations need an AI provider, and none is configured here (an administrator sets OPENAI_BASE_URL and OPENAI_MODEL).</p>`}
        <div class="checks"><label><input type="checkbox" id="disable_diarization" name="disable_diarization" value="1"> Skip speaker labels</label></div>
        ${speakerCountControl('submit')}
        <button type="submit">Queue</button> <span id="submit-status" role="status"></span>
        <ul id="submit-results" class="muted"></ul>
      </form></div>
      <div class="card"><h2>Your jobs</h2>${
        rows.length
          ? html`<div class="table-wrap stack"><table id="queue-table"><thead><tr><th>Title</th><th>Status</th><th>Stage</th><th>Model</th><th>Length</th><th>Queued</th></tr></thead><tbody>${rows}</tbody></table></div>`
          : html`<p class="muted" id="no-jobs">No jobs yet.</p>`
      }</div>`;
    return sendPage(reply, { title: 'Speech queue', user, active: 'speech', body, scripts: ['queue.js'] });
  }

  r.get(
    '/speech',
    { schema: { ...hidden, querystring: z.object({ notice: z.string().max(60).optional() }) }, config: { auth: speechUser } },
    (request, reply) => queuePage(request, reply, { notice: request.query.notice }),
  );

  /**
   * The no-script submission of /speech: a URL (urlencoded or multipart) or one file (multipart,
   * CSRF token in the action URL), with the rules of POST /api/speech/jobs. Redirects (303) to the
   * new job; a refusal shows the form again with the message (422).
   */
  r.post(
    '/speech',
    {
      schema: { ...hidden, body: pageJobFieldsSchema },
      attachValidation: true,
      preValidation: emptyBodyForMultipart,
      config: { auth: speechUser, rateLimit: SPEECH_PAGE_RATE_LIMIT },
    },
    async (request, reply) => {
      const caller = userOf(request);
      let id: number;
      try {
        const { fields, source, upload } = await readSubmission(request, reply, {
          media: deps.speech.media,
          limits: uploadLimits(deps.config),
          schema: pageJobFieldsSchema,
        });
        id = (await createSubmittedJob(jobs, deps.speech.media, caller, upload, { channel: 'web', source, ...jobSettings(fields) })).id;
      } catch (err) {
        const e = normalizeError(err, request);
        if (e.status === 422) return queuePage(request, reply.code(422), { error: e.message });
        throw err;
      }
      return reply.redirect(`/speech/jobs/${id}?notice=queued`, 303);
    },
  );

  async function targetOptions(job: { model: string; diarizationRequested: boolean }): Promise<TargetOption[]> {
    const workers = await deps.workers.listWorkers();
    return workers
      .filter((w) => !w.revoked)
      .map((w) => ({
        name: w.name,
        online: w.fresh,
        incompatible: targetIncompatibility(w),
        mismatches: targetMismatches(w, job),
      }));
  }

  type CardErrors = { error?: string; speakersError?: string; actionsError?: string; targetError?: string; editsError?: string };

  /**
   * The cards of a job page, rendered now for this user, by name (the page's `data-card` slots).
   * The full page and GET /speech/jobs/{id}/cards both come from here, so a card fetched after a
   * live event is exactly the card a fresh load would show. `only` limits what is read and rendered.
   */
  async function jobCards(request: FastifyRequest, reply: FastifyReply, jobId: number, errors: CardErrors = {}, only?: ReadonlySet<JobPageCard>) {
    const want = (name: JobPageCard) => !only || only.has(name);
    const user = userOf(request);
    const state = await deps.speech.retranscription.state(user, jobId);
    const { job } = state;
    const [detail, availability, segments] = await Promise.all([
      jobs.detail(job),
      deps.speech.models.snapshot(),
      want('transcript') || want('transcript-notes') || want('reading') ? deps.speech.repo.readingSegments(job.id, job.currentPass) : Promise.resolve([]),
    ]);
    const p = presentJobDetail(job, detail, { unresponsiveAfterSeconds: deps.config.SPEECH_UNRESPONSIVE_AFTER_SECONDS, publicBaseUrl, availability });
    const diarization = presentDiarization(diarizationRecord(job), job.speakerLabels, detail.speakerStats);
    const csrf = reply.generateCsrf();
    const mayChange = job.owner.id === user.id || JobService.canManageAll(user);
    const owner = job.owner.id === user.id;
    const aiActions = deps.speech.ai !== null && hasPermission(user, 'provider_openai');
    const cards = new Map<JobPageCard, SafeHtml | ''>();
    const put = (name: JobPageCard, render: () => SafeHtml | '' | Promise<SafeHtml | ''>) =>
      want(name) ? Promise.resolve(render()).then((h) => void cards.set(name, h)) : undefined;
    await Promise.all([
      put('summary', () => summaryCard(job, p)),
      put('facts', () => factsCard(job, p)),
      put('liveness', () => livenessCard(job, p)),
      put('worker', () => workerCard(p)),
      put('player', () => playerCard(job)),
      put('reading', () => readingCard(job, segments)),
      put('edits', async () => editsCard(job, owner, await deps.speech.repo.listEdits(job.id), csrf, errors.editsError)),
      put('transcript-notes', () => transcriptNotes(job, segments)),
      put('downloads', () => downloadsCard(p)),
      put('actions', () => actionsCard(job, p, csrf, mayChange, errors.actionsError)),
      put('target', async () => (user.isAdmin ? targetCard(job, await targetOptions(job), csrf, errors.targetError) : '')),
      put('speakers', () => speakersCard(job, diarization, owner, csrf, errors.speakersError)),
      put('analysis', () => analysisCard(job, p, aiActions && mayChange, csrf)),
      put('translations', () => translationsCard(job, p)),
      put('metadata', () => (owner ? metadataCard(job, aiActions, csrf) : '')),
      put('retranscription', () => retranscriptionCard(state, csrf, errors.error)),
      put('revisions', () => revisionsCard(state)),
      put('runtime-log', () => runtimeLogCard(p)),
    ]);
    return { job, p, user, cards, segments };
  }

  /** The job page; the errors are refused form posts of one card (shown with a 422). */
  async function jobPage(request: FastifyRequest, reply: FastifyReply, jobId: number, opts: CardErrors & { notice?: string | undefined } = {}) {
    const { job, p, user, cards, segments } = await jobCards(request, reply, jobId, opts);
    // Each card sits in a slot (display: contents) the page's script swaps when the job changes.
    const slot = (name: JobPageCard) => html`<div class="slot" data-card="${name}">${cards.get(name) ?? ''}</div>`;
    // The side column (wide screens) or the sections after the transcript (phones, collapsed): a
    // section whose card is empty for this user or this state is not shown (CSS :has(.slot:empty)).
    const side = (name: JobPageCard, title: string, open = false) =>
      html`<details class="side-section" data-section="${name}" ${open ? new SafeHtml('open') : ''}><summary>${title}</summary><div class="slot" data-card="${name}">${cards.get(name) ?? ''}</div></details>`;
    const body = html`${noticeCard(opts.notice)}
      <div class="job-layout">
        <div class="job-main">
          ${slot('summary')}
          ${transcriptCard(job, segments, slot('player'), reply.cspNonce?.style ?? '', job.owner.id === user.id)}
        </div>
        <aside class="job-side" aria-label="About this job">
          ${side('facts', 'Facts')}
          ${side('downloads', 'Download')}
          ${side('speakers', 'Speakers')}
          ${side('edits', 'Corrections')}
          ${side('actions', 'Share and manage', true)}
          ${side('liveness', 'Liveness')}${side('worker', 'Worker')}
          ${side('target', 'Execution target')}
          ${side('analysis', 'Analysis')}${side('translations', 'Translations')}${side('metadata', 'Title and note')}
          ${side('retranscription', 'Re-transcribe')}${side('revisions', 'Earlier passes')}
          ${side('runtime-log', 'Runtime log')}
        </aside>
      </div>`;
    return sendPage(reply, { title: p.source_label, user, active: 'speech', body, scripts: user.isAdmin ? ['job.js', 'admin.js'] : ['job.js'] });
  }

  /**
   * The job page's cards as HTML, for its script: `only` names the cards (comma-separated; all when
   * absent). The same render functions, reads and authorization as the page itself (404 for a job
   * the caller cannot see); errors in the API's shape. `job` says which attempt and pass they show.
   */
  r.get(
    '/speech/jobs/:jobId/cards',
    {
      schema: { ...hidden, params: jobParams, querystring: z.object({ only: z.string().max(400).optional() }) },
      config: { auth: speechUser },
    },
    async (request, reply) => {
      const names = request.query.only
        ?.split(',')
        .map((n) => n.trim())
        .filter(Boolean);
      const unknown = names?.filter((n) => !(JOB_PAGE_CARDS as readonly string[]).includes(n)) ?? [];
      if (unknown.length) throw validationFailed({ only: [`unknown cards: ${unknown.join(', ')}; known: ${SWAPPABLE_JOB_PAGE_CARDS.join(', ')}`] });
      const only = new Set((names ?? SWAPPABLE_JOB_PAGE_CARDS) as JobPageCard[]);
      only.delete('transcript'); // the segments stream; the list is never swapped
      const { job, cards } = await jobCards(request, reply, request.params.jobId, {}, only);
      void reply.header('cache-control', 'no-store');
      return reply.send({
        ok: true as const,
        job: { id: job.id, status: job.status, attempt: job.attempt, pass: job.currentPass },
        cards: Object.fromEntries([...cards].map(([name, h]) => [name, String(h)])),
      });
    },
  );

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
      config: { auth: speechUser, rateLimit: SPEECH_PAGE_RATE_LIMIT },
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
        return reply.send({ ok: true as const, message: RETRANSCRIPTION_STARTED, job: presentJob(job, { publicBaseUrl }) });
      }
      return reply.redirect(`/speech/jobs/${job.id}?notice=retranscription-started`, 303);
    },
  );

  type CardError = 'speakersError' | 'actionsError' | 'targetError' | 'editsError';
  /**
   * A form post of the job page (session plus CSRF) doing what an API route does: redirected (303)
   * to `redirect` with a notice, or the job page again with the refusal in `card` (422).
   */
  const formAction =
    <B>(
      card: CardError,
      notice: string,
      action: (user: AuthUser, jobId: number, body: B) => Promise<unknown>,
      redirect = (jobId: number) => `/speech/jobs/${jobId}`,
    ) =>
    async (request: FastifyRequest<{ Params: { jobId: number }; Body: B }>, reply: FastifyReply) => {
      const { jobId } = request.params;
      // A form whose fields the route's schema refused (routes with attachValidation): the message on the page.
      if (request.validationError) return jobPage(request, reply.code(422), jobId, { [card]: normalizeError(request.validationError, request).message });
      try {
        await action(userOf(request), jobId, request.body as B);
      } catch (err) {
        if (err instanceof AppError && err.reason === 'validation_failed') return jobPage(request, reply.code(422), jobId, { [card]: err.message });
        throw err;
      }
      return reply.redirect(`${redirect(jobId)}?notice=${notice}`, 303);
    };
  const speakerForm = z.record(z.string().regex(/^(_csrf|name_S[1-9][0-9]{0,3})$/), z.string().max(200)).optional();
  const action = { config: { auth: speechUser, rateLimit: SPEECH_PAGE_RATE_LIMIT } };

  r.post(
    '/speech/jobs/:jobId/diarization',
    { schema: { ...hidden, params: jobParams, body: pageRerunSchema }, attachValidation: true, ...action },
    formAction('speakersError', 'diarization-requested', (user, jobId, body: z.output<typeof pageRerunSchema>) =>
      deps.speech.diarization.rerun(user, jobId, body?.speakers ?? null),
    ),
  );

  r.post(
    '/speech/jobs/:jobId/speakers',
    { schema: { ...hidden, params: jobParams, body: speakerForm }, ...action },
    formAction('speakersError', 'speakers-saved', (user, jobId, body: Record<string, string | undefined> | undefined) => {
      const names = Object.fromEntries(
        Object.entries(body ?? {})
          .filter(([k]) => k.startsWith('name_'))
          .map(([k, v]) => [k.slice('name_'.length), (v ?? '').trim().slice(0, 60)]),
      );
      if (!Object.keys(names).length) throw validationFailed({ speakers: ['no speaker names were sent'] });
      return deps.speech.diarization.rename(user, jobId, names);
    }),
  );

  // Cancel, restart, delete and the public link: the rules of the API routes, as form posts.
  const simple = { schema: { ...hidden, params: jobParams, body: csrfOnly }, ...action };
  r.post(
    '/speech/jobs/:jobId/cancel',
    simple,
    formAction('actionsError', 'cancel-requested', (user, jobId) => jobs.cancel(user, jobId)),
  );
  r.post(
    '/speech/jobs/:jobId/restart',
    simple,
    formAction('actionsError', 'restarted', (user, jobId) => jobs.restart(user, jobId)),
  );
  r.post(
    '/speech/jobs/:jobId/delete',
    simple,
    formAction(
      'actionsError',
      'deleted',
      (user, jobId) => jobs.remove(user, jobId),
      () => '/speech',
    ),
  );
  r.post(
    '/speech/jobs/:jobId/share',
    simple,
    formAction('actionsError', 'share-created', (user, jobId) => shares.enable(user, jobId)),
  );
  r.post(
    '/speech/jobs/:jobId/share/disable',
    simple,
    formAction('actionsError', 'share-disabled', (user, jobId) => shares.disable(user, jobId)),
  );
  /** Merging two speakers and undoing the latest correction, as forms (the rules of the corrections API). */
  r.post(
    '/speech/jobs/:jobId/speakers/merge',
    {
      schema: { ...hidden, params: jobParams, body: z.object({ _csrf: z.string().max(200).optional(), from: z.string().max(8), into: z.string().max(8) }) },
      attachValidation: true,
      ...action,
    },
    formAction('speakersError', 'speakers-merged', (user, jobId, body: { from: string; into: string }) => edits.merge(user, jobId, body.from, body.into)),
  );
  r.post(
    '/speech/jobs/:jobId/edits/undo',
    { schema: { ...hidden, params: jobParams, body: csrfOnly }, ...action },
    formAction('editsError', 'edit-undone', (user, jobId) => edits.undo(user, jobId)),
  );

  /** Playback on the share page (`playback` 1 or 0), with the rules of PATCH /api/speech/jobs/{jobId}/share. */
  r.post(
    '/speech/jobs/:jobId/share/playback',
    {
      schema: { ...hidden, params: jobParams, body: z.object({ _csrf: z.string().max(200).optional(), playback: z.enum(['0', '1']) }) },
      config: { auth: speechUser, rateLimit: SPEECH_PAGE_RATE_LIMIT },
    },
    formAction('actionsError', 'share-playback', (user, jobId, body: { playback: '0' | '1' }) => shares.setPlayback(user, jobId, body.playback === '1')),
  );

  /** Administrators: the execution target (`auto`, `local` or `worker:<name>`), with the rules of PUT /api/speech/jobs/{jobId}/target. */
  r.post(
    '/speech/jobs/:jobId/target',
    {
      schema: { ...hidden, params: jobParams, body: z.object({ _csrf: z.string().max(200).optional(), target: z.string().max(220) }) },
      config: { auth: speechAdmin, rateLimit: SPEECH_PAGE_RATE_LIMIT },
    },
    formAction('targetError', 'target-saved', (user, jobId, body: { target: string }) => {
      const [mode, ...rest] = body.target.split(':');
      if (mode === 'auto' || mode === 'local') return jobs.setExecutionTarget(user, jobId, { mode });
      if (mode === 'worker' && rest.length) return jobs.setExecutionTarget(user, jobId, { mode, worker: rest.join(':') });
      throw validationFailed({ target: ['choose automatic, local or a worker'] });
    }),
  );
}
