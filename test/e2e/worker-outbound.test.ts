import { mkdtempSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthUser } from '../../coordinator/src/accounts/types.js';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { loadConfig } from '../../coordinator/src/config.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/src/service.js';
import { synthesiseSpeech } from '../../worker/test/helpers/speech.js';
import { createTestDatabase, randomName, testEnv, type TestDatabase } from '../support/harness.js';
import { startNode, type Proc } from '../support/processes.js';

/**
 * A worker agent (a real child process) downloads URL sources itself under the same outbound
 * policy as the coordinator, with its own allow-list. Linux routes all of 127.0.0.0/8 on `lo`, so
 * the "public" media site listens on 127.0.0.2 and both the coordinator and the worker allow exactly
 * 127.0.0.2/32; an "internal" service on 127.0.0.1 serves different speech and counts its requests.
 * A source that redirects there (or to the metadata address) fails with the policy's reason, and
 * the internal speech is never fetched, let alone transcribed.
 */
const MODEL = 'pocketsphinx-en-us';
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-worker-outbound-'));
let db: TestDatabase;
let svc: RunningCoordinator;
let owner: AuthUser;
const procs: Proc[] = [];
const servers: http.Server[] = [];
let site: string;
const internalHits: string[] = [];

async function serve(host: string, handler: http.RequestListener): Promise<number> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

async function startAgent(name: string, extra: string[], env: Record<string, string> = {}) {
  const { secret } = await svc.workers.createWorker(name);
  const p = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--work-dir', dir, ...extra], { WORKER_SECRET: secret, ...env });
  procs.push(p);
  await p.waitFor(/connected to coordinator/);
  return p;
}

async function urlJob(url: string): Promise<number> {
  return (await svc.speech.jobs.create(owner, { channel: 'web', model: MODEL, source: { type: 'url', url } })).id;
}

interface Row {
  status: string;
  failure_error: string | null;
  transcript_text: string | null;
  media_path: string | null;
}

async function row(id: number): Promise<Row> {
  const rows = await svc.orm.em.getConnection().execute<Row[]>('select status, failure_error, transcript_text, media_path from speech_jobs where id = ?', [id]);
  return rows[0]!;
}

const settled = async (id: number) => {
  await expect.poll(async () => (await row(id)).status, { timeout: 60_000, interval: 200 }).toMatch(/^(completed|failed)$/);
  return row(id);
};

beforeAll(async () => {
  const [talk, secret] = await Promise.all([
    synthesiseSpeech(dir, 'talk', ['hello world', 'good morning everyone']),
    synthesiseSpeech(dir, 'secret', ['i would like a cup of coffee', 'please call me tomorrow morning']),
  ]);
  const internalPort = await serve('127.0.0.1', (req, res) => {
    internalHits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'audio/wav' }).end(readFileSync(secret.wavPath));
  });
  const sitePort = await serve('127.0.0.2', (req, res) => {
    const url = req.url ?? '';
    if (url === '/talk.wav') return res.writeHead(200, { 'content-type': 'audio/wav' }).end(readFileSync(talk.wavPath));
    if (url === '/to-internal.wav') return res.writeHead(302, { location: `http://127.0.0.1:${internalPort}/secret.wav` }).end();
    if (url === '/to-internal-by-name.wav') return res.writeHead(302, { location: `http://localhost:${internalPort}/secret.wav` }).end();
    if (url === '/to-metadata.wav') return res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/iam.wav' }).end();
    res.writeHead(404).end();
  });
  site = `http://127.0.0.2:${sitePort}`;

  db = await createTestDatabase();
  svc = await startCoordinator(
    loadConfig(
      testEnv(db, {
        SPEECH_MEDIA_DIR: path.join(dir, 'media'),
        // The coordinator accepts the site's URLs at submission; without yt-dlp or a download
        // proxy it leaves every URL job to workers that may fetch URLs.
        OUTBOUND_ALLOW_RANGES: '127.0.0.2/32',
        SPEECH_YTDLP_PATH: 'off',
      }),
    ),
  );
  owner = (await new AccountService(svc.orm).createUser({ username: randomName('listener'), permissions: ['speech.use'] })).user;
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await svc?.close();
  await db?.drop();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

describe('worker agent downloads under the outbound policy', () => {
  it('fetches an allowed source itself and refuses redirects to loopback or the metadata address', async () => {
    const agent = await startAgent('fetcher', ['--outbound-allow-ranges', '127.0.0.2/32']);

    // The allow-list works: the worker itself downloads from 127.0.0.2 (nothing staged) and transcribes.
    const ok = await settled(await urlJob(`${site}/talk.wav`));
    expect(ok.status, ok.failure_error ?? '').toBe('completed');
    expect(ok.media_path).toBeNull();
    expect(ok.transcript_text?.toLowerCase()).toContain('morning');

    const refused: Array<[string, RegExp]> = [
      ['/to-internal.wav', /^refused by the outbound policy: the address 127\.0\.0\.1 is not allowed$/],
      ['/to-metadata.wav', /^refused by the outbound policy: the address 169\.254\.169\.254 is not allowed$/],
      // A name is checked where the connection resolves it.
      ['/to-internal-by-name.wav', /^refused by the outbound policy: localhost resolves to a blocked address/],
    ];
    for (const [p, reason] of refused) {
      const r = await settled(await urlJob(`${site}${p}`));
      expect(r.status, p).toBe('failed');
      expect(r.failure_error, p).toMatch(reason);
      expect(r.transcript_text ?? '', p).not.toContain('coffee');
    }
    expect(internalHits).toEqual([]);
    // The worker reports the refusals as failed jobs and keeps running.
    expect(agent.child.exitCode).toBeNull();
    expect(agent.lines.filter((l) => l.includes('"msg":"job failed"'))).toHaveLength(3);
    await agent.stop();
  }, 120_000);

  it('takes the allow-list from SONAR_OUTBOUND_ALLOW_RANGES; without one even the site is refused', async () => {
    const fromEnv = await startAgent('env-configured', [], { SONAR_OUTBOUND_ALLOW_RANGES: '10.9.0.0/16, 127.0.0.2/32' });
    const r = await settled(await urlJob(`${site}/to-internal.wav`));
    expect(r.failure_error).toMatch(/^refused by the outbound policy: the address 127\.0\.0\.1 is not allowed$/);
    await fromEnv.stop();

    const strict = await startAgent('strict', []);
    const s = await settled(await urlJob(`${site}/talk.wav`));
    expect(s.status).toBe('failed');
    expect(s.failure_error).toMatch(/^refused by the outbound policy: the address 127\.0\.0\.2 is not allowed$/);
    expect(internalHits).toEqual([]);
    await strict.stop();
  }, 120_000);

  it('refuses to start with a malformed allow-list (exit code 78)', async () => {
    const { secret } = await svc.workers.createWorker('misconfigured');
    const p = startNode('worker/dist/bin.js', ['--coordinator', `127.0.0.1:${svc.grpcPort}`, '--outbound-allow-ranges', '127.0.0.2/33'], {
      WORKER_SECRET: secret,
    });
    procs.push(p);
    expect(await p.exited).toBe(78);
    expect(p.lines.join('\n')).toMatch(/--outbound-allow-ranges \/ SONAR_OUTBOUND_ALLOW_RANGES: not an address or CIDR range: 127\.0\.0\.2\/33/);
  });
});
