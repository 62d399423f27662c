import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { OutboundPolicy } from '@sonar/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { download } from '../src/job-runner.js';
import { handleUncaught, isHttpClientFault } from '../src/fault-guard.js';

/**
 * The worker's source download under the outbound policy, against real HTTP servers on loopback.
 * Linux routes all of 127.0.0.0/8 on `lo`, so the "public" media site listens on 127.0.0.2 and the
 * worker's allow-list admits exactly that address (127.0.0.2/32); the "internal" service it must
 * never reach listens on 127.0.0.1 and counts every request it gets.
 */

const dir = mkdtempSync(path.join(tmpdir(), 'sonar-download-'));
let secret: { server: Server; port: number; hits: string[] };
let site: { server: Server; base: string };

async function listen(server: Server, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

beforeAll(async () => {
  const hits: string[] = [];
  const internal = createServer((req, res) => {
    hits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'audio/wav' }).end('the secret');
  });
  secret = { server: internal, port: await listen(internal, '127.0.0.1'), hits };

  const media = createServer((req, res) => {
    const url = req.url ?? '';
    if (url === '/talk.wav') return res.writeHead(200, { 'content-type': 'audio/wav' }).end('public audio');
    if (url === '/to-talk.wav') return res.writeHead(302, { location: '/talk.wav' }).end();
    if (url === '/to-loopback.wav') return res.writeHead(302, { location: `http://127.0.0.1:${secret.port}/secret` }).end();
    if (url === '/to-localhost.wav') return res.writeHead(307, { location: `http://localhost:${secret.port}/secret` }).end();
    if (url === '/to-localhost-dot.wav') return res.writeHead(302, { location: `http://localhost.:${secret.port}/secret` }).end();
    if (url === '/to-mapped.wav') return res.writeHead(302, { location: `http://[::ffff:127.0.0.1]:${secret.port}/secret` }).end();
    if (url === '/to-metadata.wav') return res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    if (url === '/loop.wav') return res.writeHead(302, { location: '/loop.wav' }).end();
    res.writeHead(404).end();
  });
  site = { server: media, base: `http://127.0.0.2:${await listen(media, '127.0.0.2')}` };
});
afterAll(async () => {
  await Promise.all([secret, site].map(({ server }) => new Promise((r) => server.close(r))));
});

describe('worker source download (outbound policy)', () => {
  const policy = new OutboundPolicy(['127.0.0.2/32']);
  afterAll(() => policy.close());
  const get = (url: string, stop = new AbortController().signal) => {
    const file = path.join(dir, `source-${Math.random().toString(36).slice(2)}`);
    return { file, done: download(policy, url, file, stop) };
  };

  it('downloads from an allowed address, following a redirect that stays allowed', async () => {
    for (const p of ['/talk.wav', '/to-talk.wav']) {
      const { file, done } = get(`${site.base}${p}`);
      await done;
      expect(readFileSync(file, 'utf8')).toBe('public audio');
    }
  });

  it('refuses a redirect to an address the allow-list does not cover, before connecting to it', async () => {
    const cases: Array<[string, RegExp]> = [
      ['/to-loopback.wav', /^refused by the outbound policy: the address 127\.0\.0\.1 is not allowed$/],
      ['/to-mapped.wav', /^refused by the outbound policy: the address ::ffff:7f00:1 is not allowed$/],
      ['/to-metadata.wav', /^refused by the outbound policy: the address 169\.254\.169\.254 is not allowed$/],
      // Names are checked where the connection resolves them (the allow-list admits no name by itself).
      ['/to-localhost.wav', /^refused by the outbound policy: localhost resolves to a blocked address/],
    ];
    for (const [p, reason] of cases) {
      const { file, done } = get(`${site.base}${p}`);
      await expect(done, p).rejects.toThrow(reason);
      expect(existsSync(file), p).toBe(false);
    }
    // Whether "localhost." resolves depends on the host's resolver; either way it is not reached.
    await expect(get(`${site.base}/to-localhost-dot.wav`).done).rejects.toThrow(
      /^(refused by the outbound policy: localhost\. resolves to a blocked address|Could not download the source: the server localhost\.(:\d+)? was not found; check the address for typing mistakes \(technical: ENOTFOUND\))/,
    );
    expect(secret.hits).toEqual([]);
  });

  it('bounds redirects and reports HTTP errors', async () => {
    await expect(get(`${site.base}/loop.wav`).done).rejects.toThrow('refused by the outbound policy: too many redirects');
    await expect(get(`${site.base}/missing.wav`).done).rejects.toThrow(
      /^Could not download the source: there is nothing at this address \(.+ answered HTTP 404 Not Found\) \(technical: HTTP 404 Not Found\)$/,
    );
  });

  it('without an allow-list refuses loopback altogether, by address and by name', async () => {
    const strict = new OutboundPolicy();
    try {
      await expect(download(strict, `${site.base}/talk.wav`, path.join(dir, 'x'), new AbortController().signal)).rejects.toThrow(
        'refused by the outbound policy: the address 127.0.0.2 is not allowed',
      );
      await expect(download(strict, `http://localhost.:${secret.port}/secret`, path.join(dir, 'y'), new AbortController().signal)).rejects.toThrow(
        'refused by the outbound policy: the host localhost. is not allowed',
      );
    } finally {
      await strict.close();
    }
    expect(secret.hits).toEqual([]);
  });

  it('stops when the job is stopped', async () => {
    const stop = new AbortController();
    stop.abort('cancel');
    await expect(get(`${site.base}/talk.wav`, stop.signal).done).rejects.toBeTruthy();
  });
});

describe('a fault of the HTTP client fails the download, not the worker', () => {
  it('four 20 MB downloads from python3 -m http.server (which closes the connection after the body) arrive whole', async () => {
    // undici 6 threw an uncaught `assert(!this.paused)` here on the first download (the file write
    // holds the stream back when the server's close arrives): the worker process died.
    const root = mkdtempSync(path.join(tmpdir(), 'sonar-http-server-'));
    const body = randomBytes(20 * 1024 * 1024);
    writeFileSync(path.join(root, 'talk.bin'), body);
    const server = spawn('python3', ['-u', '-m', 'http.server', '0', '--bind', '127.0.0.2'], { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        server.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          const m = /port (\d+)/.exec(out);
          if (m) resolve(Number(m[1]));
        });
        server.once('exit', () => reject(new Error(`python3 -m http.server exited: ${out}`)));
      });
      const policy = new OutboundPolicy(['127.0.0.2/32']);
      try {
        for (let i = 0; i < 4; i++) {
          const file = path.join(dir, `python-${i}.bin`);
          await download(policy, `http://127.0.0.2:${port}/talk.bin`, file, new AbortController().signal);
          expect(readFileSync(file).equals(body), `download ${i}`).toBe(true);
        }
      } finally {
        await policy.close();
      }
    } finally {
      server.kill('SIGKILL');
    }
  }, 60_000);

  it('an uncaught undici error ends the downloads in flight with a clear failure and the worker goes on; any other error stops it', async () => {
    // A server that sends half a body and then holds the connection open: the download waits.
    const held: ServerResponse[] = [];
    const stalling = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': '1000' }).write('x'.repeat(500));
      held.push(res);
    });
    const port = await listen(stalling, '127.0.0.2');
    const policy = new OutboundPolicy(['127.0.0.2/32']);
    const logged: string[] = [];
    const logger = { info: () => undefined, warn: () => undefined, error: (_: object, msg: string) => void logged.push(msg) };
    try {
      const pending = download(policy, `http://127.0.0.2:${port}/held.wav`, path.join(dir, 'held.wav'), new AbortController().signal);
      await expect.poll(() => held.length).toBe(1);
      const fault = new Error('The expression evaluated to a falsy value: assert(!this.paused)');
      fault.stack = `${fault.message}\n    at Parser.finish (/opt/sonar-worker/node_modules/undici/lib/dispatcher/client-h1.js:1:1)`;
      const exits: number[] = [];
      expect(isHttpClientFault(fault)).toBe(true);
      expect(handleUncaught(fault, logger, (code) => exits.push(code))).toBe('contained');
      await expect(pending).rejects.toThrow(/^Could not download the source: the HTTP client failed/);
      expect(exits).toEqual([]);
      expect(logged).toEqual([expect.stringContaining('the worker goes on')]);
      // Anything else ends the process with status 1, as Node would.
      expect(isHttpClientFault(new Error('a bug of ours'))).toBe(false);
      expect(handleUncaught(new Error('a bug of ours'), logger, (code) => exits.push(code))).toBe('fatal');
      expect(exits).toEqual([1]);
    } finally {
      for (const res of held) res.destroy();
      await policy.close();
      await new Promise<void>((resolve) => stalling.close(() => resolve()));
    }
  });
});
