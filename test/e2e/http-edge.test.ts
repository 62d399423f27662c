import { Writable } from 'node:stream';
import pino from 'pino';
import { io, type Socket } from 'socket.io-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggerOptions, redactUrl, stripSqlValues } from '../../coordinator/src/http/log-redaction.js';
import { browserLogin, CookieJar, createJwtUser, createTestApp, extractCsrf, randomName, type TestApp } from '../support/harness.js';

/**
 * The HTTP edge: no credentials or query values in the logs, shared rate-limit budgets, the
 * socket.io Origin check and JWTs that die with a password change (socket.io side).
 */

/** Every line the app's pino writes, parsed. */
class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void) {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
  get text() {
    return this.lines.join('\n');
  }
  entries(): Array<Record<string, unknown>> {
    return this.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  }
}

const PUBLIC_BASE_URL = 'http://sonar.test:8080';
const log = new LogCapture();
let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await createTestApp({
    env: {
      PUBLIC_BASE_URL,
      LOGIN_RATE_LIMIT_PER_MINUTE: '3',
      DNS_RATE_LIMIT_PER_MINUTE: '4',
      TOKEN_RATE_LIMIT_PER_MINUTE: '2',
      ADMIN_RATE_LIMIT_PER_MINUTE: '2',
    },
    logger: { level: 'info', stream: log },
    beforeReady: async (app) => {
      // Failing queries with a secret among their parameters, the way a product query would fail.
      app.get<{ Querystring: { secret: string } }>('/probe/failing-query', { config: { auth: 'public' } }, async (req) => {
        await app.deps.orm.em.getConnection().execute('select * from no_such_table where token_hash = ?', [req.query.secret]);
        return { ok: true };
      });
      app.get<{ Querystring: { secret: string } }>('/probe/duplicate-key', { config: { auth: 'public' } }, async (req) => {
        await app.deps.orm.em.transactional(async (em) => {
          const c = em.getConnection();
          await c.execute('create temp table probe_secrets (v text primary key) on commit drop', [], 'run', em.getTransactionContext());
          await c.execute('insert into probe_secrets values (?)', [req.query.secret], 'run', em.getTransactionContext());
          await c.execute('insert into probe_secrets values (?)', [req.query.secret], 'run', em.getTransactionContext());
        });
        return { ok: true };
      });
      app.get('/probe/log-headers', { config: { auth: 'public' } }, async (req) => {
        req.log.info({ headers: req.headers }, 'headers seen');
        return { ok: true };
      });
    },
  });
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => t?.close());

describe('no secrets in logs', () => {
  it('redacts credentials from logged URLs (query parameters, share links) and headers', async () => {
    const user = await t.accounts.createUser({ username: randomName(), permissions: ['speech.use', 'speech.api'] });
    const { token } = await t.accounts.createPersonalToken(user.user.id, { name: 'log', scopes: ['speech.api'] });
    const { key } = await t.accounts.createDnsApiKey({ name: 'log-key' });
    const before = log.lines.length;

    const res = await t.app.inject({ method: 'GET', url: `/api/speech/transcribe/status?apikey=${token}&verbose=1`, headers: { 'x-api-key': token } });
    expect(res.statusCode).toBe(200);
    await t.app.inject({ method: 'GET', url: `/api/dns/zones?API_KEY=${encodeURIComponent(key)}`, remoteAddress: '198.51.100.200' });
    await t.app.inject({ method: 'GET', url: `/api/account/me?access_token=jwt-ish.${token}&token=${key}` });
    await t.app.inject({ method: 'GET', url: '/shared/speech/transcript/shr_secret_share_token_1234.txt' });
    await t.app.inject({
      method: 'GET',
      url: '/probe/log-headers',
      headers: { authorization: `Bearer ${token}`, 'x-api-key': key, cookie: `sonar_session=${token}`, 'x-trace': 'kept' },
    });

    const written = log.lines.slice(before).join('\n');
    // The request log is there, at info, with the path and the harmless parameters.
    expect(written).toContain('"url":"/api/speech/transcribe/status?apikey=[redacted]&verbose=1"');
    expect(written).toContain('"url":"/api/dns/zones?API_KEY=[redacted]"');
    expect(written).toContain('"url":"/api/account/me?access_token=[redacted]&token=[redacted]"');
    expect(written).toContain('"url":"/shared/speech/transcript/[redacted]"');
    expect(written).toContain('"x-trace":"kept"');
    expect(written).toContain('"authorization":"[redacted]"');
    // And nothing of the secrets anywhere.
    for (const secret of [token, token.slice(10), key, key.slice(10), 'shr_secret_share_token_1234']) expect(written).not.toContain(secret);
  });

  it('redactUrl keeps everything but the credential values', () => {
    expect(redactUrl('/a/b')).toBe('/a/b');
    expect(redactUrl('/a?x=1&apikey=s3cret&y=2&Api%5Fkey=s3cret2&flag')).toBe('/a?x=1&apikey=[redacted]&y=2&Api%5Fkey=[redacted]&flag');
    expect(redactUrl('/shared/speech/transcript/abc?download=1')).toBe('/shared/speech/transcript/[redacted]?download=1');
    // By name: dyndns2's `pass`, `session`, any `*_token`.
    expect(redactUrl('/nic/update?hostname=h.example&myip=192.0.2.1&pass=hunter2')).toBe('/nic/update?hostname=h.example&myip=192.0.2.1&pass=[redacted]');
    expect(redactUrl('/a?session=abc&csrf_token=def&refresh-token=ghi&x=1')).toBe('/a?session=[redacted]&csrf_token=[redacted]&refresh-token=[redacted]&x=1');
    // By shape, under any name and in the path: sonar_… credentials and JWTs.
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlX2hlcmU';
    expect(redactUrl(`/a?note=sonar_ddns_AbC123xyz&q=${jwt}&b=1`)).toBe('/a?note=[redacted]&q=[redacted]&b=1');
    expect(redactUrl('/a/sonar_pat_0123456789abcdef0123/x')).toBe('/a/[redacted]/x');
    // Names of this service that are no credentials stay.
    expect(redactUrl('/a?cookie_name=sonar_session&owner=sonar_owner_id')).toBe('/a?cookie_name=sonar_session&owner=sonar_owner_id');
    // By shape: a Bearer or Basic credential, a URL's password.
    expect(redactUrl('/a?h=Bearer%20abcdefgh12345&u=https%3A%2F%2Fbob:hunter22@example.org%2Fx')).not.toMatch(/abcdefgh12345|hunter22/);
    expect(redactUrl('/a?next=https://bob:hunter22@example.org/x')).toBe('/a?next=https://bob:[redacted]@example.org/x');
  });

  it('redacts every credential-looking parameter name of a generated list, and no ordinary one', () => {
    const bases = [
      'pwd',
      'pass',
      'passwd',
      'password',
      'passphrase',
      'secret',
      'client_secret',
      'token',
      'access_token',
      'apikey',
      'api_key',
      'api-key',
      'apiKey',
      'auth',
      'authorization',
      'credentials',
      'credential',
      'private_key',
      'privateKey',
      'session',
      'session_id',
      'sessionid',
      'sessionId',
      'sid',
      'csrf',
      'xsrf',
      'jwt',
      'signature',
      'otp',
    ];
    const names = bases.flatMap((b) => [b, b.toUpperCase(), `x_${b}`, `${b}_2`, `${b}[]`, `user[${b}]`, `X-${b}`, `db.${b}`]);
    for (const name of names)
      expect(redactUrl(`/a?${encodeURIComponent(name)}=v4lue-0f-${name.length}&page=2`), name).toBe(`/a?${encodeURIComponent(name)}=[redacted]&page=2`);
    for (const name of [
      'q',
      'page',
      'limit',
      'format',
      'model',
      'language',
      'keyword',
      'monkey',
      'sort_key',
      'owner',
      'passage',
      'cookie_name',
      'zone',
      'inline',
    ]) {
      expect(redactUrl(`/a?${name}=plain`), name).toBe(`/a?${name}=plain`);
    }
  });

  it('a dyndns2 update logs no token (pass=sonar_ddns_…), nor do messages and fields that hold one', async () => {
    const secret = `sonar_ddns_${'Z'.repeat(40)}`;
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsb2cifQ.c2lnbmF0dXJlX2hlcmVfdG9v';
    const before = log.lines.length;
    await t.app.inject({ method: 'GET', url: `/nic/update?hostname=h.example.test&myip=192.0.2.1&user=x&pass=${secret}` });
    await t.app.inject({ method: 'GET', url: `/api/dns/zones?whatever=${secret}&q=${jwt}` });
    t.app.log.info({ body: { pass: 'hunter2', ddns: secret, nested: { reset_token: 'r1' } } }, `token was ${secret}`);
    t.app.log.warn('bearer %s', jwt);
    const written = log.lines.slice(before).join('\n');
    expect(written).toContain('pass=[redacted]');
    for (const s of [secret, secret.slice(11), jwt, jwt.slice(20), 'hunter2', '"r1"']) expect(written).not.toContain(s);
    expect(written).toContain('token was [redacted]');
  });
});

describe('SQL in error logs', () => {
  it('logs a failing query without its parameter values (and answers the documented 500 body)', async () => {
    const secret = `cbsecret_${randomName('v')}_${'f'.repeat(24)}`;
    const before = log.lines.length;
    const res = await t.app.inject({ method: 'GET', url: `/probe/failing-query?secret=${secret}` });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ ok: false, reason: 'internal_error', message: 'Internal server error.' });
    expect(res.body).not.toContain(secret);

    const entries = log.entries().slice(before);
    const error = entries.find((e) => e.msg === 'unhandled error') as { level: number; err: { message: string; stack: string } } | undefined;
    expect(error?.level).toBe(50);
    // The statement stays readable, with a placeholder where the value was.
    expect(error?.err.message).toContain('select * from no_such_table where token_hash = ?');
    expect(error?.err.message).toContain('relation "no_such_table" does not exist');
    expect(log.lines.slice(before).join('\n')).not.toContain(secret);
  });

  it('drops the values PostgreSQL repeats in error details (duplicate keys)', async () => {
    const secret = `sharetok_${randomName('v')}_${'a'.repeat(24)}`;
    const before = log.lines.length;
    const res = await t.app.inject({ method: 'GET', url: `/probe/duplicate-key?secret=${secret}` });
    expect(res.statusCode).toBe(500);
    const error = log
      .entries()
      .slice(before)
      .find((e) => e.msg === 'unhandled error') as { err: { detail?: string; message: string } } | undefined;
    expect(error?.err.message).toMatch(/duplicate key value violates unique constraint/);
    expect(error?.err.detail).toBe('Key (v)=(?) already exists.');
    expect(log.lines.slice(before).join('\n')).not.toContain(secret);
  });

  it('the service logger (pino outside Fastify) uses the same error serializer', async () => {
    const capture = new LogCapture();
    const logger = pino(loggerOptions('info'), capture);
    const secret = 'hash_0123456789abcdef0123456789abcdef';
    const err = await t.orm.em
      .getConnection()
      .execute(`select * from users where username = ? and id = 'x'`, [secret])
      .catch((e: unknown) => e);
    logger.error({ err }, 'query failed');
    expect(capture.text).toContain('query failed');
    expect(capture.text).not.toContain(secret);
    expect(capture.text).not.toContain(`"x"`);
    expect(stripSqlValues(`insert into t values ('a''b', E'c\\'d', 42)`)).toBe('insert into t values (?, ?, 42)');
  });
});

describe('rate limits', () => {
  it('one sign-in budget across POST /api/account/login and POST /login', async () => {
    const remoteAddress = '192.0.2.70';
    const jar = new CookieJar();
    const csrf = extractCsrf(jar.store(await t.app.inject({ method: 'GET', url: '/login', remoteAddress })).body);
    const form = (password: string) =>
      t.app.inject({
        method: 'POST',
        url: '/login',
        remoteAddress,
        headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ _csrf: csrf, username: 'nobody', password }).toString(),
      });
    const api = () => t.app.inject({ method: 'POST', url: '/api/account/login', remoteAddress, payload: { username: 'nobody', password: 'wrong-password' } });

    // LOGIN_RATE_LIMIT_PER_MINUTE = 3: three attempts in all, whichever route they take.
    expect((await api()).statusCode).toBe(401);
    expect((await form('wrong-password')).statusCode).toBe(401);
    expect((await api()).statusCode).toBe(401);
    const limitedForm = await form('wrong-password');
    expect(limitedForm.statusCode).toBe(429);
    expect(limitedForm.headers['retry-after']).toBeDefined();
    const limitedApi = await api();
    expect(limitedApi.statusCode).toBe(429);
    expect(limitedApi.json()).toMatchObject({ ok: false, reason: 'rate_limited' });
    // Another client keeps its own budget.
    expect(
      (await t.app.inject({ method: 'POST', url: '/api/account/login', remoteAddress: '192.0.2.71', payload: { username: 'nobody', password: 'x-password' } }))
        .statusCode,
    ).toBe(401);
  });

  it('the DNS API shares one budget across its routes', async () => {
    const remoteAddress = '192.0.2.80';
    const statuses: number[] = [];
    for (const url of ['/api/dns/zones', '/api/dns/zones/example.org', '/api/dns/zones', '/api/dns/zones/example.org/cache']) {
      statuses.push((await t.app.inject({ method: 'GET', url, remoteAddress })).statusCode);
    }
    expect(statuses).toEqual([401, 401, 401, 401]);
    const limited = await t.app.inject({
      method: 'POST',
      url: '/api/dns/records/add',
      remoteAddress,
      payload: { domain: 'a.example.org', type: 'A', target: '192.0.2.1' },
    });
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ ok: false, reason: 'rate_limited', message: expect.any(String) });
    expect(limited.headers['retry-after']).toBeDefined();
    expect((await t.app.inject({ method: 'GET', url: '/api/dns/zones', remoteAddress: '192.0.2.81' })).statusCode).toBe(401);
  });

  it('token management and the admin routes have budgets too', async () => {
    const tokens = await Promise.all([0, 1, 2].map(() => t.app.inject({ method: 'GET', url: '/api/account/tokens', remoteAddress: '192.0.2.90' })));
    expect(tokens.map((r) => r.statusCode).sort()).toEqual([401, 401, 429]);
    const admin = [];
    for (let i = 0; i < 3; i++) admin.push(await t.app.inject({ method: 'GET', url: '/irc/api/admin/aliases?network=x', remoteAddress: '192.0.2.91' }));
    expect(admin.map((r) => r.statusCode)).toEqual([401, 401, 429]);
    expect(admin[2]!.json()).toEqual({ success: false, error: expect.any(String) });
  });
});

describe('socket.io handshakes', () => {
  let user: { name: string; password: string };
  let token: string;
  const sockets: Socket[] = [];
  afterAll(() => sockets.forEach((s) => s.close()));

  beforeAll(async () => {
    user = { name: randomName('live'), password: 'live-password-123' };
    await t.accounts.createUser({ username: user.name, password: user.password, permissions: ['speech.use'] });
    token = (
      await t.app.inject({ method: 'POST', url: '/api/account/login', remoteAddress: '192.0.2.100', payload: { username: user.name, password: user.password } })
    ).json().token;
  });

  /** Resolves 'connected' or the connect_error message. */
  function handshake(opts: { origin?: string; transport: 'websocket' | 'polling'; token?: string; cookie?: string }): Promise<string> {
    const headers: Record<string, string> = {};
    if (opts.origin) headers.origin = opts.origin;
    if (opts.cookie) headers.cookie = opts.cookie;
    const socket = io(base, {
      transports: [opts.transport],
      auth: opts.token ? { token: opts.token } : {},
      extraHeaders: headers,
      reconnection: false,
      timeout: 5_000,
    });
    sockets.push(socket);
    return new Promise((resolve) => {
      socket.on('connect', () => {
        socket.close();
        resolve('connected');
      });
      socket.on('connect_error', (err) => resolve(`refused: ${err.message}`));
    });
  }

  it('refuses a foreign Origin on WebSocket upgrades and polling, even with valid credentials', async () => {
    expect(await handshake({ transport: 'websocket', token, origin: 'https://evil.example' })).toBe('refused: websocket error');
    expect(await handshake({ transport: 'polling', token, origin: 'https://evil.example' })).toBe('refused: xhr poll error');
    expect(await handshake({ transport: 'polling', token, origin: 'null' })).toBe('refused: xhr poll error');
    // The same host on another port is another origin.
    expect(await handshake({ transport: 'websocket', token, origin: 'http://sonar.test:9090' })).toBe('refused: websocket error');
  });

  it('allows PUBLIC_BASE_URL’s origin, the same origin as the server, and clients without Origin', async () => {
    expect(await handshake({ transport: 'websocket', token, origin: PUBLIC_BASE_URL })).toBe('connected');
    expect(await handshake({ transport: 'polling', token, origin: PUBLIC_BASE_URL })).toBe('connected');
    expect(await handshake({ transport: 'websocket', token, origin: base })).toBe('connected');
    expect(await handshake({ transport: 'websocket', token })).toBe('connected');
    // A session cookie from the right origin works as before.
    const { jar } = await browserLogin(t.app, user.name, user.password);
    expect(await handshake({ transport: 'polling', cookie: jar.header(), origin: PUBLIC_BASE_URL })).toBe('connected');
  });

  it('a JWT stops opening sockets once the user’s password changes', async () => {
    const name = randomName('live');
    await t.accounts.createUser({ username: name, password: 'first-password-1', permissions: ['speech.use'] });
    const jwt = (
      await t.app.inject({ method: 'POST', url: '/api/account/login', remoteAddress: '192.0.2.101', payload: { username: name, password: 'first-password-1' } })
    ).json().token;
    expect(await handshake({ transport: 'websocket', token: jwt })).toBe('connected');
    await t.accounts.setPassword(name, 'second-password-2');
    expect(await handshake({ transport: 'websocket', token: jwt })).toBe('refused: unauthenticated');
  });
});

describe('ids in paths', () => {
  it('take decimal digits only: " 1", "1 ", "0x10", "1e3", "+1" and "01" are 422 under the parameter, "1" is not', async () => {
    const admin = await createJwtUser(t, [], { isAdmin: true });
    for (const raw of [' 1', '1 ', '0x10', '1e3', '+1', '01', '1.0', '2147483648']) {
      for (const [url, field] of [
        [`/api/speech/jobs/${encodeURIComponent(raw)}`, 'jobId'],
        [`/api/spam/profiles/${encodeURIComponent(raw)}`, 'id'],
      ] as const) {
        const res = await t.app.inject({ method: 'GET', url, headers: admin.auth });
        expect(res.statusCode, url).toBe(422);
        expect(Object.keys(res.json<{ errors: Record<string, string[]> }>().errors), url).toEqual([field]);
      }
    }
    // the account's token routes (a tighter rate limit): one case
    const token = await t.app.inject({ method: 'DELETE', url: '/api/account/tokens/0x10', headers: admin.auth });
    expect(token.statusCode).toBe(422);
    expect((await t.app.inject({ method: 'GET', url: '/api/speech/jobs/1', headers: admin.auth })).statusCode).toBe(404);
  });
});
