import type {} from '@fastify/jwt';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, createReadStream, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { browserLogin, createJwtUser, createTestApp, type TestApp, type TestUser } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * Resumable uploads (tus) of the speech queue against a listening app: an upload interrupted after
 * two chunks resumes from the server's offset with tus-js-client (fingerprint in URL storage) and
 * becomes a job like a multipart upload; authorization, ownership, the upload limit, metadata
 * validation, the lost-response lookup and the expiry cleanup.
 */

type UploadOptions = ConstructorParameters<typeof tus.Upload>[1];
type UrlStorage = NonNullable<UploadOptions['urlStorage']>;
type PreviousUpload = Awaited<ReturnType<UrlStorage['findAllUploads']>>[number];

/** tus-js-client's URL storage (fingerprint → upload URL) kept in memory, as localStorage is in a browser. */
class MemoryUrlStorage implements UrlStorage {
  readonly entries = new Map<string, PreviousUpload & { fingerprint: string }>();
  private seq = 0;
  async findAllUploads() {
    return [...this.entries.values()];
  }
  async findUploadsByFingerprint(fingerprint: string) {
    return [...this.entries.values()].filter((e) => e.fingerprint === fingerprint);
  }
  async removeUpload(key: string) {
    this.entries.delete(key);
  }
  async addUpload(fingerprint: string, upload: PreviousUpload) {
    const key = `tus::${fingerprint}::${++this.seq}`;
    this.entries.set(key, { ...upload, urlStorageKey: key, fingerprint });
    return key;
  }
}

const MiB = 1024 * 1024;
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-tus-'));
const mediaDir = path.join(dir, 'media');
const tusDir = path.join(mediaDir, 'tus');
let t: TestApp;
let base: string;
let endpoint: string;
let alice: TestUser;
let bob: TestUser;
let wav: string;
let wavBytes: Buffer;

const mkUser = (permissions: string[]) => createJwtUser(t, permissions);

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function tusFiles(): Promise<string[]> {
  try {
    return (await readdir(tusDir)).sort();
  } catch {
    return [];
  }
}

async function head(url: string, headers: Record<string, string> = {}) {
  return fetch(url, { method: 'HEAD', headers: { 'tus-resumable': '1.0.0', ...headers } });
}

/**
 * Runs `fn` with the clock (Date only: timers stay real) moved past SPEECH_UPLOAD_EXPIRY_HOURS (24),
 * the clock @tus/file-store's deleteExpired reads.
 */
async function afterExpiry(fn: () => Promise<void>) {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(Date.now() + 25 * 3600_000);
  try {
    await fn();
  } finally {
    vi.useRealTimers();
  }
}

async function jobRow(id: number) {
  const rows = await t.orm.em
    .getConnection()
    .execute<Array<{ media_path: string | null; media_sha256: string | null; source_size_bytes: string; owner_id: number }>>(
      'select media_path, media_sha256, source_size_bytes, owner_id from speech_jobs where id = ?',
      [id],
    );
  return rows[0]!;
}

async function jobCount() {
  const rows = await t.orm.em.getConnection().execute<Array<{ n: string }>>('select count(*) as n from speech_jobs');
  return Number(rows[0]!.n);
}

/** Runs one tus upload to its end; resolves with how it ended and how many bytes it sent. */
function runUpload(
  file: string | Buffer,
  opts: Partial<UploadOptions> & { abortAfterBytes?: number; resume?: boolean },
): Promise<{ outcome: 'success' | 'aborted' | 'error'; upload: tus.Upload; sent: number; jobId: string | null; error: tus.DetailedError | Error | null }> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    const { abortAfterBytes, resume, ...options } = opts;
    const upload: tus.Upload = new tus.Upload(typeof file === 'string' ? (createReadStream(file) as never) : file, {
      endpoint,
      chunkSize: MiB,
      retryDelays: [],
      ...options,
      onChunkComplete: (chunkSize, accepted) => {
        sent += chunkSize;
        if (abortAfterBytes !== undefined && accepted >= abortAfterBytes) {
          void upload.abort().then(() => resolve({ outcome: 'aborted', upload, sent, jobId: null, error: null }), reject);
        }
      },
      onSuccess: ({ lastResponse }) => resolve({ outcome: 'success', upload, sent, jobId: lastResponse.getHeader('X-Sonar-Job-Id') ?? null, error: null }),
      onError: (error) => resolve({ outcome: 'error', upload, sent, jobId: null, error }),
    });
    if (!resume) {
      upload.start();
      return;
    }
    upload.findPreviousUploads().then((previous) => {
      if (previous[0]) upload.resumeFromPreviousUpload(previous[0]);
      upload.start();
    }, reject);
  });
}

beforeAll(async () => {
  t = await createTestApp({ env: { SPEECH_MEDIA_DIR: mediaDir, SPEECH_UPLOAD_MAX_MB: '8' } });
  await registerModelWorker(t.orm, 'models', ['small', 'large', 'turbo']);
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  endpoint = `${base}/api/speech/uploads`;
  alice = await mkUser(['speech.use']);
  bob = await mkUser(['speech.use']);
  // About 6 MB of 16 kHz mono PCM.
  wav = path.join(dir, 'interview.wav');
  execFileSync('ffmpeg', ['-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=190', '-ac', '1', '-ar', '16000', wav]);
  wavBytes = readFileSync(wav);
  expect(wavBytes.length).toBeGreaterThan(6_000_000);
}, 60_000);
afterAll(async () => {
  await t?.close();
});

describe('resumable uploads (tus)', () => {
  it('resumes an interrupted upload from the server offset and queues a job with the same bytes and settings', async () => {
    const urlStorage = new MemoryUrlStorage();
    const metadata = {
      filename: 'interview.wav',
      filetype: 'audio/wav',
      source_label: 'Resumable interview',
      source_note: 'sent in 1 MB chunks',
      model: 'large',
      language: 'sv',
      translation_target_languages: 'en,de',
      disable_diarization: '1',
      sonar_owner_id: String(bob.id), // a client cannot choose the owner
    };
    const common = { headers: alice.auth, metadata, urlStorage, storeFingerprintForResuming: true, removeFingerprintOnSuccess: true };
    const jobsBefore = await jobCount();

    const first = await runUpload(wav, { ...common, abortAfterBytes: 2 * MiB });
    expect(first.outcome).toBe('aborted');
    expect(first.sent).toBe(2 * MiB);
    const uploadUrl = first.upload.url!;
    expect(uploadUrl).toMatch(/\/api\/speech\/uploads\/[A-Za-z0-9_-]+$/);
    expect(urlStorage.entries.size).toBe(1); // the fingerprint remembers the upload URL
    const id = uploadUrl.split('/').pop()!;

    const offset = await head(uploadUrl, alice.auth);
    expect(offset.status).toBe(200);
    const serverOffset = Number(offset.headers.get('upload-offset'));
    expect(serverOffset).toBeGreaterThan(0);
    expect(serverOffset).toBe(2 * MiB);
    expect(Number(offset.headers.get('upload-length'))).toBe(wavBytes.length);
    expect(await tusFiles()).toEqual([id, `${id}.json`].sort());

    // Other users and anonymous callers cannot touch it.
    expect((await head(uploadUrl, bob.auth)).status).toBe(404);
    expect((await head(uploadUrl)).status).toBe(401);
    const foreignPatch = await fetch(uploadUrl, {
      method: 'PATCH',
      headers: { ...bob.auth, 'tus-resumable': '1.0.0', 'upload-offset': String(serverOffset), 'content-type': 'application/offset+octet-stream' },
      body: Buffer.alloc(1024),
    });
    expect(foreignPatch.status).toBe(404);
    const anonPatch = await fetch(uploadUrl, {
      method: 'PATCH',
      headers: { 'tus-resumable': '1.0.0', 'upload-offset': String(serverOffset), 'content-type': 'application/offset+octet-stream' },
      body: Buffer.alloc(1024),
    });
    expect(anonPatch.status).toBe(401);
    expect(Number((await head(uploadUrl, alice.auth)).headers.get('upload-offset'))).toBe(serverOffset);
    expect((await fetch(`${uploadUrl}/job`, { headers: alice.auth })).status).toBe(409); // not finished yet
    expect((await fetch(`${uploadUrl}/job`, { headers: bob.auth })).status).toBe(404);

    // A new Upload of the same file finds the stored URL by fingerprint and resumes at the server's offset.
    const second = await runUpload(wav, { ...common, resume: true });
    expect(second.error).toBeNull();
    expect(second.outcome).toBe('success');
    expect(second.upload.url).toBe(uploadUrl);
    expect(second.sent).toBe(wavBytes.length - serverOffset);
    expect(second.sent).toBeLessThan(wavBytes.length);
    expect(urlStorage.entries.size).toBe(0); // removed on success
    const jobId = Number(second.jobId);
    expect(jobId).toBeGreaterThan(0);
    expect(await jobCount()).toBe(jobsBefore + 1);

    // The stored media is the file, moved out of the tus folder (no copy left behind).
    const row = await jobRow(jobId);
    expect(row.owner_id).toBe(alice.id);
    expect(row.media_path).toBeTruthy();
    expect(path.dirname(row.media_path!)).toBe(path.join(mediaDir, 'jobs', String(jobId)));
    expect(path.extname(row.media_path!)).toBe('.wav');
    expect(sha256(readFileSync(row.media_path!))).toBe(sha256(wavBytes));
    expect(row.media_sha256).toBe(sha256(wavBytes));
    expect(Number(row.source_size_bytes)).toBe(wavBytes.length);
    expect(await tusFiles()).toEqual([]);

    const detail = await t.app.inject({ method: 'GET', url: `/api/speech/jobs/${jobId}`, headers: alice.auth });
    expect(detail.statusCode).toBe(200);
    expect(detail.json().job).toMatchObject({
      id: jobId,
      status: 'queued',
      queue_channel: 'web',
      source_type: 'upload',
      source_label: 'Resumable interview',
      source_note: 'sent in 1 MB chunks',
      source_filename: 'interview.wav',
      source_size_bytes: wavBytes.length,
      model: 'large',
      language: 'sv',
      translation_target_languages: ['en', 'de'],
      diarization: { requested: false, state: 'skipped' },
    });
    expect(detail.json().job.source_duration_seconds).toBeCloseTo(190, 0);

    // A client that lost the final response: the job by upload id, and a resuming HEAD sees it complete.
    const lookup = await fetch(`${uploadUrl}/job`, { headers: alice.auth });
    expect(lookup.status).toBe(200);
    expect(await lookup.json()).toMatchObject({ ok: true, job: { id: jobId, source_label: 'Resumable interview' } });
    expect((await fetch(`${uploadUrl}/job`, { headers: bob.auth })).status).toBe(404);
    const done = await head(uploadUrl, alice.auth);
    expect(done.status).toBe(200);
    expect(done.headers.get('upload-offset')).toBe(String(wavBytes.length));
    expect(done.headers.get('x-sonar-job-id')).toBe(String(jobId));
    expect((await head(uploadUrl, bob.auth)).status).toBe(404);
    // Resuming once more sends nothing and reports the same job.
    const again = await runUpload(wav, { headers: alice.auth, metadata, uploadUrl });
    expect(again.outcome).toBe('success');
    expect(again.sent).toBe(0);
    expect(again.jobId).toBe(String(jobId));
    expect(await jobCount()).toBe(jobsBefore + 1);
  }, 60_000);

  it('takes chunks far larger than the 1 MiB JSON body limit (the page sends 32 MiB chunks)', async () => {
    const whole = await runUpload(wav, { headers: alice.auth, metadata: { filename: 'whole.wav' }, chunkSize: 32 * MiB });
    expect(whole.error).toBeNull();
    expect(whole.sent).toBe(wavBytes.length);
    const row = await jobRow(Number(whole.jobId));
    expect(row.media_sha256).toBe(sha256(wavBytes));
  }, 30_000);

  it('refuses unauthenticated and unauthorized creation (401, 403) and leaves no file', async () => {
    const before = await tusFiles();
    const anon = await fetch(endpoint, { method: 'POST', headers: { 'tus-resumable': '1.0.0', 'upload-length': '1000' } });
    expect(anon.status).toBe(401);
    expect(await anon.json()).toMatchObject({ ok: false, reason: 'unauthenticated' });
    const carol = await mkUser([]);
    const noPermission = await fetch(endpoint, { method: 'POST', headers: { ...carol.auth, 'tus-resumable': '1.0.0', 'upload-length': '1000' } });
    expect(noPermission.status).toBe(403);
    const badToken = await fetch(endpoint, { method: 'POST', headers: { authorization: 'Bearer nope', 'tus-resumable': '1.0.0', 'upload-length': '1000' } });
    expect(badToken.status).toBe(401);
    expect(await tusFiles()).toEqual(before);
  });

  it('refuses an upload over the effective limit (413) before storing anything', async () => {
    const before = await tusFiles();
    const raw = await fetch(endpoint, { method: 'POST', headers: { ...alice.auth, 'tus-resumable': '1.0.0', 'upload-length': String(8 * MiB + 1) } });
    expect(raw.status).toBe(413);
    const big = Buffer.alloc(9 * MiB, 1);
    const viaClient = await runUpload(big, { headers: alice.auth, metadata: { filename: 'big.wav' } });
    expect(viaClient.outcome).toBe('error');
    expect((viaClient.error as tus.DetailedError).originalResponse?.getStatus()).toBe(413);
    expect(viaClient.sent).toBe(0);
    expect(await tusFiles()).toEqual(before);
    // Exactly at the limit is accepted (creation only here), then terminated by its owner.
    const atLimit = await fetch(endpoint, { method: 'POST', headers: { ...alice.auth, 'tus-resumable': '1.0.0', 'upload-length': String(8 * MiB) } });
    expect(atLimit.status).toBe(201);
    const location = new URL(atLimit.headers.get('location')!, endpoint).toString();
    expect((await fetch(location, { method: 'DELETE', headers: { ...bob.auth, 'tus-resumable': '1.0.0' } })).status).toBe(404);
    expect((await fetch(location, { method: 'DELETE', headers: { ...alice.auth, 'tus-resumable': '1.0.0' } })).status).toBe(204);
    expect(await tusFiles()).toEqual(before);
  });

  it('validates the metadata at creation and the media at the end (422), queuing nothing', async () => {
    const jobsBefore = await jobCount();
    const before = await tusFiles();
    const badModel = await runUpload(wavBytes.subarray(0, 64 * 1024), { headers: alice.auth, metadata: { filename: 'a.wav', model: 'gigantic' } });
    expect(badModel.outcome).toBe('error');
    const res = (badModel.error as tus.DetailedError).originalResponse!;
    expect(res.getStatus()).toBe(422);
    expect(JSON.parse(res.getBody())).toMatchObject({
      ok: false,
      reason: 'validation_failed',
      errors: { model: ['no registered worker serves model "gigantic"; served models: large, small, turbo'] },
    });
    const badLanguage = await runUpload(wavBytes.subarray(0, 1024), {
      headers: alice.auth,
      metadata: { filename: 'a.wav', translation_target_languages: 'sv,not a language' },
    });
    expect((badLanguage.error as tus.DetailedError).originalResponse!.getStatus()).toBe(422);
    expect(JSON.parse((badLanguage.error as tus.DetailedError).originalResponse!.getBody()).errors).toHaveProperty('translation_target_languages');

    const text = path.join(dir, 'notes.txt');
    writeFileSync(text, 'not audio at all\n'.repeat(200));
    const notAudio = await runUpload(text, { headers: alice.auth, metadata: { filename: 'notes.txt' } });
    expect(notAudio.outcome).toBe('error');
    const body = JSON.parse((notAudio.error as tus.DetailedError).originalResponse!.getBody());
    expect((notAudio.error as tus.DetailedError).originalResponse!.getStatus()).toBe(422);
    expect(body.errors.media_file[0]).toMatch(/not readable audio or video/);
    expect(await jobCount()).toBe(jobsBefore);
    expect(await tusFiles()).toEqual(before);
    expect(await readdir(path.join(mediaDir, 'incoming')).catch(() => [])).toEqual([]);
  }, 30_000);

  it('needs the CSRF token from a browser session', async () => {
    const { jar } = await browserLogin(t.app, alice.name, alice.password);
    const page = await t.app.inject({ method: 'GET', url: '/speech', headers: { cookie: jar.header() } });
    const csrf = /data-csrf="([^"]+)"/.exec(page.body)![1]!;
    // tus-js-client is bundled into the page's module (content-hashed, cached for a year).
    const module = /src="(\/assets\/queue\.[A-Z0-9]+\.js)"/.exec(page.body)![1]!;
    const asset = await fetch(`${base}${module}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toContain('immutable');
    expect(await asset.text()).toContain('/api/speech/uploads');
    const without = await fetch(endpoint, { method: 'POST', headers: { cookie: jar.header(), 'tus-resumable': '1.0.0', 'upload-length': '100' } });
    expect(without.status).toBe(403);
    const withToken = await fetch(endpoint, {
      method: 'POST',
      headers: { cookie: jar.header(), 'x-csrf-token': csrf, 'tus-resumable': '1.0.0', 'upload-length': '100' },
    });
    expect(withToken.status).toBe(201);
    const location = new URL(withToken.headers.get('location')!, endpoint).toString();
    // HEAD is a safe method: the session alone is enough.
    expect((await head(location, { cookie: jar.header() })).headers.get('upload-offset')).toBe('0');
    expect((await fetch(location, { method: 'DELETE', headers: { cookie: jar.header(), 'x-csrf-token': csrf, 'tus-resumable': '1.0.0' } })).status).toBe(204);
  });

  it('removes expired unfinished uploads in the maintenance task', async () => {
    const partial = await runUpload(wav, { headers: alice.auth, metadata: { filename: 'left.wav' }, abortAfterBytes: MiB });
    expect(partial.outcome).toBe('aborted');
    const id = partial.upload.url!.split('/').pop()!;
    expect(await tusFiles()).toEqual(expect.arrayContaining([id, `${id}.json`]));
    const uploads = t.app.deps.speech.uploads;
    const libraryPass = vi.spyOn(uploads.server, 'cleanUpExpiredUploads');
    expect(await uploads.cleanupExpired()).toBe(0); // not expired yet
    expect(await tusFiles()).toEqual(expect.arrayContaining([id, `${id}.json`]));
    await afterExpiry(async () => {
      expect(await uploads.cleanupExpired()).toBeGreaterThanOrEqual(1);
    });
    // @tus/server's own expiry removed the unfinished upload.
    expect(libraryPass).toHaveBeenCalledTimes(2);
    await expect(libraryPass.mock.results[1]!.value).resolves.toBeGreaterThanOrEqual(1);
    libraryPass.mockRestore();
    expect(await tusFiles()).toEqual([]);
    expect((await head(partial.upload.url!, alice.auth)).status).toBe(404);
  }, 30_000);

  it('also removes expired leftovers: a finished upload that never became a job, a broken info file, a stray data file', async () => {
    const uploads = t.app.deps.speech.uploads;
    const jobsBefore = await jobCount();
    const create = async (length: number) => {
      const res = await fetch(endpoint, { method: 'POST', headers: { ...alice.auth, 'tus-resumable': '1.0.0', 'upload-length': String(length) } });
      expect(res.status).toBe(201);
      return new URL(res.headers.get('location')!, endpoint).toString();
    };
    // All but the last byte over tus; the last byte landed but the process stopped before onUploadFinish queued a job.
    const finishedUrl = await create(1000);
    const patch = await fetch(finishedUrl, {
      method: 'PATCH',
      headers: { ...alice.auth, 'tus-resumable': '1.0.0', 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' },
      body: new Uint8Array(wavBytes.subarray(0, 999)),
    });
    expect(patch.status).toBe(204);
    const finishedId = finishedUrl.split('/').pop()!;
    appendFileSync(path.join(tusDir, finishedId), wavBytes.subarray(999, 1000));
    const finishedHead = await head(finishedUrl, alice.auth);
    expect(finishedHead.headers.get('upload-offset')).toBe('1000');
    expect(finishedHead.headers.get('upload-length')).toBe('1000');
    // An info file that no longer parses, and a data file whose info file is gone.
    const brokenId = (await create(100)).split('/').pop()!;
    writeFileSync(path.join(tusDir, `${brokenId}.json`), '{"id": "trunc');
    writeFileSync(path.join(tusDir, 'stray-data'), 'x'.repeat(100));
    const leftovers = [finishedId, `${finishedId}.json`, brokenId, `${brokenId}.json`, 'stray-data'].sort();
    expect(await tusFiles()).toEqual(leftovers);

    expect(await uploads.cleanupExpired()).toBe(0); // not expired yet
    expect(await tusFiles()).toEqual(leftovers);
    await afterExpiry(async () => {
      expect(await uploads.cleanupExpired()).toBe(3);
    });
    expect(await tusFiles()).toEqual([]);
    expect((await head(finishedUrl, alice.auth)).status).toBe(404);
    expect(await jobCount()).toBe(jobsBefore);
  }, 30_000);
});
