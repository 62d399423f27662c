import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserLogin, createJwtUser, createTestApp, type TestApp, type TestUser } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';
import { multipartForm } from '../support/multipart.js';

/**
 * Models on offer are the ones registered workers really serve (speech_workers.capabilities; a local
 * runner only with SPEECH_LOCAL_MODELS): others are refused at submit, a queued job no connected
 * worker can take says why at read time (stage_detail, liveness `suspect` with a reason), and a
 * language the only engine of a model lacks is refused. Also: an unreadable upload names the file.
 */
let t: TestApp;
let alice: TestUser;
let admin: TestUser;
let mediaDir: string;

beforeAll(async () => {
  mediaDir = await mkdtemp(path.join(os.tmpdir(), 'sonar-models-media-'));
  t = await createTestApp({ env: { SPEECH_MEDIA_DIR: mediaDir, WORKER_PRESENCE_TTL_MS: '900000' } });
  alice = await createJwtUser(t, ['speech.use']);
  admin = await createJwtUser(t, [], { isAdmin: true });
});
afterAll(async () => {
  await t?.close();
  await rm(mediaDir, { recursive: true, force: true });
});

const submit = (payload: Record<string, unknown>) =>
  t.app.inject({ method: 'POST', url: '/api/speech/jobs', headers: alice.auth, payload: { source_url: 'https://media.example.org/talk.mp3', ...payload } });
const get = (url: string, user: TestUser = alice) => t.app.inject({ method: 'GET', url, headers: user.auth });
const jobCount = async () => Number((await t.orm.em.getConnection().execute<Array<{ n: string }>>('select count(*) as n from speech_jobs'))[0]!.n);
/** The /speech page as a signed-in browser sees it (pages take sessions only). */
async function queuePage() {
  const { jar } = await browserLogin(t.app, alice.name, alice.password);
  const res = await t.app.inject({ method: 'GET', url: '/speech', headers: { cookie: jar.header() } });
  expect(res.statusCode).toBe(200);
  return res.body;
}
const setSeen = (name: string, present: boolean) =>
  t.orm.em.getConnection().execute(`update speech_workers set last_seen_at = ${present ? 'now()' : `now() - interval '1 hour'`} where name = ?`, [name]);

describe('model catalog', () => {
  it('with no worker registered nothing is offered and every model is refused (422 under model)', async () => {
    const status = (await get('/api/speech/status')).json();
    expect(status).toMatchObject({ models: [], connected_models: [] });
    const res = await submit({ model: 'small' });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({
      ok: false,
      reason: 'validation_failed',
      message: 'no registered worker serves model "small"; no worker has registered any model yet',
      errors: { model: ['no registered worker serves model "small"; no worker has registered any model yet'] },
    });
    // The default model (small) is refused the same way when the field is left out.
    expect((await submit({})).json().errors.model).toEqual([expect.stringContaining('"small"')]);
    const page = await queuePage();
    expect(page).toContain('id="no-models"');
    expect(page).not.toMatch(/<option/);
    expect(await jobCount()).toBe(0);
  });

  it('offers what workers advertise; refuses the rest listing what is served; flags models only offline workers serve', async () => {
    await registerModelWorker(t.orm, 'gpu-box', ['large']); // registered, not connected
    await registerModelWorker(t.orm, 'sphinx', ['pocketsphinx-en-us'], { present: true, modelLanguages: { 'pocketsphinx-en-us': ['en'] } });

    const status = (await get('/api/speech/status')).json();
    expect(status.models).toEqual(['large', 'pocketsphinx-en-us']);
    expect(status.connected_models).toEqual(['pocketsphinx-en-us']);
    const page = await queuePage();
    expect(page).toContain('<option value="large" >large (no worker connected)</option>');
    expect(page).toContain('<option value="pocketsphinx-en-us" >pocketsphinx-en-us</option>');
    expect(page).not.toMatch(/<option[^>]*>(small|turbo)/);

    for (const model of ['small', 'turbo', 'gigantic']) {
      const res = await submit({ model });
      expect(res.statusCode, model).toBe(422);
      expect(res.json().errors).toEqual({ model: [`no registered worker serves model "${model}"; served models: large, pocketsphinx-en-us`] });
    }
    expect(await jobCount()).toBe(0);

    // Only an offline worker has "large": accepted, and the response says nobody connected can take it.
    const reason = 'No connected worker serves model "large" (connected: pocketsphinx-en-us)';
    const res = await submit({ model: 'large' });
    expect(res.statusCode).toBe(201);
    expect(res.json().message).toBe(`Job queued. ${reason}; it waits until one connects.`);
    const job = res.json().job;
    expect(job).toMatchObject({ status: 'queued', model: 'large', stage_label: 'Waiting for a worker', stage_detail: reason });
    const detail = (await get(`/api/speech/jobs/${job.id}`)).json().job;
    expect(detail.stage_detail).toBe(reason);
    expect(detail.liveness).toMatchObject({ state: 'suspect', reason, worker: null });
    expect(detail.runtime_log).toEqual([
      expect.objectContaining({ event: 'queued', level: 'info' }),
      expect.objectContaining({ event: 'no_worker', level: 'warn', message: `${reason}; the job waits until one connects.` }),
    ]);
    // Computed at read time: nothing of it is written to the job.
    const [row] = await t.orm.em.getConnection().execute<Array<{ stage_detail: string | null }>>('select stage_detail from speech_jobs where id = ?', [job.id]);
    expect(row!.stage_detail).toBeNull();

    // A job a connected worker takes reads normally, in the same list.
    const ok = await submit({ model: 'pocketsphinx-en-us' });
    expect(ok.statusCode).toBe(201);
    expect(ok.json()).toMatchObject({ message: 'Job queued.', job: { stage_detail: null } });
    const okDetail = (await get(`/api/speech/jobs/${ok.json().job.id}`)).json().job;
    expect(okDetail.liveness).toMatchObject({ state: 'inactive', reason: null });
    const list = (await get('/api/speech/jobs')).json().jobs as Array<{ id: number; stage_detail: string | null }>;
    expect(list.map((j) => [j.id, j.stage_detail])).toEqual([
      [ok.json().job.id, null],
      [job.id, reason],
    ]);

    // The worker with "large" connects: the same job now reads as simply waiting.
    await setSeen('gpu-box', true);
    expect((await get(`/api/speech/jobs/${job.id}`)).json().job).toMatchObject({ stage_detail: null, liveness: { state: 'inactive', reason: null } });
    expect((await get('/api/speech/status')).json().connected_models).toEqual(['large', 'pocketsphinx-en-us']);
    await setSeen('gpu-box', false);
    expect((await get(`/api/speech/jobs/${job.id}`)).json().job.stage_detail).toBe(reason);

    // Pinned to a worker that is not connected: that is the reason.
    const pinned = await t.app.inject({
      method: 'PUT',
      url: `/api/speech/jobs/${job.id}/target`,
      headers: admin.auth,
      payload: { mode: 'worker', worker: 'gpu-box' },
    });
    expect(pinned.statusCode).toBe(200);
    expect(pinned.json().job.execution_target).toEqual({ mode: 'worker', worker: 'gpu-box' });
    expect((await get(`/api/speech/jobs/${job.id}`)).json().job).toMatchObject({
      stage_detail: 'The pinned worker "gpu-box" is not connected',
      liveness: { state: 'suspect', reason: 'The pinned worker "gpu-box" is not connected' },
    });
  });

  it('refuses a language the only engine of a model lacks (422 under language); accepts its own and detection', async () => {
    const before = await jobCount();
    const res = await submit({ model: 'pocketsphinx-en-us', language: 'de' });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({
      ok: false,
      reason: 'validation_failed',
      errors: { language: ['model "pocketsphinx-en-us" transcribes only en, not "de"; leave language empty or choose another model'] },
    });
    expect(await jobCount()).toBe(before);
    for (const language of ['en', 'en-US', undefined]) {
      expect((await submit({ model: 'pocketsphinx-en-us', ...(language ? { language } : {}) })).statusCode, String(language)).toBe(201);
    }
    // A model whose workers say nothing about languages takes any.
    expect((await submit({ model: 'large', language: 'de' })).statusCode).toBe(201);
  });

  it('a local runner serves only the models on SPEECH_LOCAL_MODELS (default small), and stands by while a remote worker is connected', async () => {
    await registerModelWorker(t.orm, 'local-runner', ['small', 'turbo'], { local: true, present: true });
    const status = (await get('/api/speech/status')).json();
    expect(status.models).toEqual(['large', 'pocketsphinx-en-us', 'small']);
    // The remote "sphinx" worker is connected, so the local runner does not claim now.
    expect(status.connected_models).toEqual(['pocketsphinx-en-us']);
    expect((await submit({ model: 'turbo' })).json().errors.model).toEqual([expect.stringContaining('served models: large, pocketsphinx-en-us, small')]);
    const small = await submit({ model: 'small' });
    expect(small.statusCode).toBe(201);
    expect(small.json().job.stage_detail).toBe(
      'No connected remote worker serves model "small"; the local runner that has it stands by while remote workers are connected (connected: pocketsphinx-en-us)',
    );
    await setSeen('sphinx', false);
    expect((await get(`/api/speech/jobs/${small.json().job.id}`)).json().job.stage_detail).toBeNull();
    await setSeen('sphinx', true);
  });
});

describe('unreadable upload', () => {
  it('422 names the uploaded file and gives ffprobe’s reason, never the temporary path', async () => {
    const { payload, contentType } = multipartForm([
      { name: 'model', value: 'pocketsphinx-en-us' },
      {
        name: 'media_file',
        filename: 'Quarterly notes.mp3',
        contentType: 'audio/mpeg',
        data: Buffer.from('Minutes of the meeting: not audio at all.\n'.repeat(100)),
      },
    ]);
    const before = await jobCount();
    const res = await t.app.inject({ method: 'POST', url: '/api/speech/jobs', headers: { ...alice.auth, 'content-type': contentType }, payload });
    expect(res.statusCode).toBe(422);
    const message: string = res.json().errors.media_file[0];
    expect(res.json()).toMatchObject({ ok: false, reason: 'validation_failed', message });
    expect(message).toMatch(/^"Quarterly notes\.mp3" is not readable audio or video: \S/);
    // ffprobe's own words (its first meaningful stderr line), e.g. "mp3: Format mp3 detected only with low score…".
    expect(message).toMatch(/mp3|Invalid data|misdetection|could not/i);
    expect(message).not.toContain(mediaDir);
    expect(message).not.toContain(os.tmpdir());
    expect(message).not.toMatch(/ffprobe (version|exited)|configuration:/);
    expect(await jobCount()).toBe(before);
  });
});
