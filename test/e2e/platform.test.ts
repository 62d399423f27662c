import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/harness.js';

const rootVersion = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ env: { METRICS_TOKEN: 'metrics-token-0123456789', LOGIN_RATE_LIMIT_PER_MINUTE: '3' } });
});
afterAll(async () => t?.close());

describe('GET /api/platform', () => {
  it('returns the root package version and nothing about framework or runtime', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/platform' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, version: rootVersion });
    expect(rootVersion).toMatch(/^\d+\.\d+\.\d+/);
    const leaked = Object.keys(res.headers).filter((h) => /powered|server|runtime/i.test(h));
    expect(leaked).toEqual([]);
    expect(res.body).not.toMatch(/fastify|node|v\d+\.\d+\.\d+/i);
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('echoes a caller-supplied request id', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/platform', headers: { 'x-request-id': 'trace-abc-123' } });
    expect(res.headers['x-request-id']).toBe('trace-abc-123');
  });
});

describe('unknown routes', () => {
  it('answer 404 in the common error shape', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/nope?x=1' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ ok: false, reason: 'not_found', message: 'No route GET /api/nope.' });
  });
});

describe('OpenAPI', () => {
  it('documents routes from their zod schemas and serves a browsable page', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe(rootVersion);
    const login = doc.paths['/api/account/login'].post;
    expect(login.requestBody.content['application/json'].schema.required).toEqual(['username', 'password']);
    expect(Object.keys(login.responses)).toEqual(expect.arrayContaining(['200', '401', '422', '429']));
    expect(doc.paths['/api/platform'].get.responses['200']).toBeDefined();
    // HTML pages and the metrics endpoint are not part of the API document.
    expect(doc.paths['/login']).toBeUndefined();
    expect(doc.paths['/metrics']).toBeUndefined();
    const page = await t.app.inject({ method: 'GET', url: '/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
  });
});

describe('GET /metrics', () => {
  it('serves Prometheus text to loopback with request latency by route', async () => {
    await t.app.inject({ method: 'GET', url: '/api/platform' });
    const res = await t.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    expect(res.body).toMatch(/http_request_duration_seconds_count\{method="GET",route="\/api\/platform",status_code="200"\} \d+/);
    expect(res.body).toContain('speech_workers_connected 0');
    expect(res.body).toContain('# TYPE queue_jobs gauge');
    expect(res.body).toContain('speech_jobs{status="queued"} 0');
  });

  it('is refused to other addresses unless they bring the token', async () => {
    const denied = await t.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.5' });
    expect(denied.statusCode).toBe(403);
    expect(denied.body).not.toContain('http_request_duration_seconds');
    const wrong = await t.app.inject({
      method: 'GET',
      url: '/metrics',
      remoteAddress: '203.0.113.5',
      headers: { authorization: 'Bearer metrics-token-0123456788' },
    });
    expect(wrong.statusCode).toBe(403);
    const ok = await t.app.inject({
      method: 'GET',
      url: '/metrics',
      remoteAddress: '203.0.113.5',
      headers: { authorization: 'Bearer metrics-token-0123456789' },
    });
    expect(ok.statusCode).toBe(200);
  });
});

describe('login throttle (Redis-backed)', () => {
  it('answers 429 rate_limited after the configured attempts per minute', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await t.app.inject({ method: 'POST', url: '/api/account/login', remoteAddress: '192.0.2.44', payload: { username: 'x', password: 'y' } });
      statuses.push(res.statusCode);
      if (res.statusCode === 429) {
        expect(res.json()).toMatchObject({ ok: false, reason: 'rate_limited' });
        expect(res.headers['retry-after']).toBeDefined();
      }
    }
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    // The counter lives in Redis, under this coordinator's key prefix.
    const keys = await t.redis.keys(`${t.config.REDIS_KEY_PREFIX}rl:*`);
    expect(keys.length).toBeGreaterThan(0);
    // Another client address is not affected.
    const other = await t.app.inject({ method: 'POST', url: '/api/account/login', remoteAddress: '192.0.2.45', payload: { username: 'x', password: 'y' } });
    expect(other.statusCode).toBe(401);
  });
});
