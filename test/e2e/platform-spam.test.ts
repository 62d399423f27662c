import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRuleTable } from '../../coordinator/src/platform/spam/spamc.js';
import { createJwtUser, createTestApp, type TestApp, type TestUser } from '../support/harness.js';
import { freePort } from '../support/processes.js';
import { startSpamd, type SpamdServer } from '../support/spamd.js';

/**
 * POST /api/spam/analyze against a real SpamAssassin spamd started by the test (local rules only),
 * spoken to over SPAMC: GTUBE scores as spam, an ordinary message as ham, every matched rule comes
 * with its description, profiles change the verdict, and spamd being down is a 503 — never a zero.
 */
let spamd: SpamdServer;
let t: TestApp;
let down: TestApp;
let owner: TestUser & { token: string };
let other: TestUser;

const GTUBE = 'XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X';
const HAM = [
  'From: Anna Berg <anna@partner.example>',
  'To: team@company.example',
  'Subject: Minutes of Tuesday’s planning meeting',
  'Date: Tue, 24 Nov 2026 10:15:00 +0100',
  'Message-ID: <20261124101500.4711@partner.example>',
  'MIME-Version: 1.0',
  'Content-Type: text/plain; charset=utf-8',
  '',
  'Hi all,',
  '',
  'attached are the notes from Tuesday. We agreed to move the release to the first week of December',
  'and to review the test plan on Friday. Let me know if I missed anything.',
  '',
  'Anna',
].join('\n');

async function token(app: TestApp, user: TestUser, scopes: string[]) {
  const res = await app.app.inject({
    method: 'POST',
    url: '/api/account/tokens',
    headers: user.auth,
    payload: { name: `t${Date.now()}${Math.random()}`, scopes },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ token: string }>().token;
}

const analyze = (app: TestApp, bearer: string, body: Record<string, unknown>) =>
  app.app.inject({
    method: 'POST',
    url: '/api/spam/analyze',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    payload: body,
  });

beforeAll(async () => {
  spamd = await startSpamd();
  t = await createTestApp({ env: { SPAMD_PORT: String(spamd.port), SPAMD_TIMEOUT_MS: '60000' } });
  down = await createTestApp({ env: { SPAMD_PORT: String(await freePort()) } });
  const u = await createJwtUser(t, ['spam.analyze']);
  owner = { ...u, token: await token(t, u, ['spam.analyze']) };
  other = await createJwtUser(t, ['spam.analyze']);
}, 120_000);
afterAll(async () => {
  await t?.close();
  await down?.close();
  await spamd?.stop();
});

describe('POST /api/spam/analyze on a real spamd', () => {
  it('GTUBE is spam, with its rule and description; the answer says scoring was degraded (network tests off)', async () => {
    const res = await analyze(t, owner.token, { from: 'x@spam.example', subject: 'test', body: `Hello\n${GTUBE}\n` });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json();
    expect(a).toMatchObject({ ok: true, status: 'degraded', verdict: 'spam', threshold: 5, profile: null });
    expect(a.score).toBeGreaterThanOrEqual(1000);
    expect(a.rules).toContainEqual({ name: 'GTUBE', score: 1000, description: 'BODY: Generic Test for Unsolicited Bulk Email', source: 'spamassassin' });
    expect(a.warnings[0]).toMatch(/network tests are off/);
  });

  it('an ordinary message is ham (raw RFC 822 form), with the rules that matched', async () => {
    const res = await analyze(t, owner.token, { message: HAM });
    expect(res.statusCode, res.body).toBe(200);
    const a = res.json();
    expect(a).toMatchObject({ ok: true, verdict: 'ham' });
    expect(a.score).toBeLessThan(5);
    expect(a.spamassassin.required_score).toBe(5);
    for (const r of a.rules) expect(r.description.length).toBeGreaterThan(0);
  });

  it('a profile sets the threshold, allow and deny lists and extra rules; another user’s profile is 404', async () => {
    const create = await t.app.inject({
      method: 'POST',
      url: '/api/spam/profiles',
      headers: owner.auth,
      payload: {
        name: 'strict',
        threshold: 2,
        deny_senders: ['partner.example'],
        extra_rules: [{ name: 'MENTIONS_RELEASE', pattern: 'release\\s+to', field: 'body', score: 1.5, description: 'Talks about moving a release' }],
      },
    });
    expect(create.statusCode, create.body).toBe(201);
    const profile = create.json().profile;
    const strict = (await analyze(t, owner.token, { message: HAM, profile_id: profile.id })).json();
    expect(strict).toMatchObject({ verdict: 'spam', threshold: 2, profile: { id: profile.id, name: 'strict' } });
    expect(strict.rules).toContainEqual(expect.objectContaining({ name: 'PROFILE_DENY_SENDER', score: 100, source: 'profile' }));
    expect(strict.rules).toContainEqual({ name: 'MENTIONS_RELEASE', score: 1.5, description: 'Talks about moving a release', source: 'profile' });
    // The same profile allowing the sender instead.
    const put = await t.app.inject({
      method: 'PUT',
      url: `/api/spam/profiles/${profile.id}`,
      headers: owner.auth,
      payload: { name: 'strict', threshold: 2, allow_senders: ['anna@partner.example'] },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect((await analyze(t, owner.token, { from: 'Anna <anna@partner.example>', subject: 'x', body: GTUBE, profile_id: profile.id })).json()).toMatchObject({
      verdict: 'spam', // GTUBE (1000) outweighs the allow list (-100)
      rules: expect.arrayContaining([expect.objectContaining({ name: 'PROFILE_ALLOW_SENDER', score: -100 })]),
    });
    const otherToken = await token(t, other, ['spam.analyze']);
    const foreign = await analyze(t, otherToken, { message: HAM, profile_id: profile.id });
    expect(foreign.statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: `/api/spam/profiles/${profile.id}`, headers: other.auth })).statusCode).toBe(404);
    // Patterns that do not compile or backtrack catastrophically are refused.
    const bad = await t.app.inject({
      method: 'POST',
      url: '/api/spam/profiles',
      headers: owner.auth,
      payload: {
        name: 'bad',
        extra_rules: [
          { name: 'A_RULE', pattern: '(a+)+$', score: 1 },
          { name: 'B_RULE', pattern: '([', score: 1 },
        ],
      },
    });
    expect(bad.statusCode).toBe(422);
    expect(Object.keys(bad.json().errors).sort()).toEqual(['extra_rules.0.pattern', 'extra_rules.1.pattern']);
    expect((await t.app.inject({ method: 'DELETE', url: `/api/spam/profiles/${profile.id}`, headers: owner.auth })).statusCode).toBe(200);
  });

  it('only a user-bound token with scope spam.analyze: no scope, JWT, DNS keys (global or not) and no permission are refused', async () => {
    const noScope = await token(t, owner, ['speech.api']);
    expect((await analyze(t, noScope, { body: 'hi' })).statusCode).toBe(403);
    expect((await analyze(t, owner.auth.authorization.slice('Bearer '.length), { body: 'hi' })).statusCode).toBe(401);
    for (const global of [true, false]) {
      const key = await t.accounts.createDnsApiKey({ name: `k${global}`, username: global ? undefined : owner.name });
      expect(key.global).toBe(global);
      expect((await analyze(t, key.key, { body: 'hi' })).statusCode, `global ${global}`).toBe(401);
    }
    const unpermitted = await createJwtUser(t, []);
    const tok = await token(t, unpermitted, ['spam.analyze']);
    expect((await analyze(t, tok, { body: 'hi' })).statusCode).toBe(403);
    expect((await analyze(t, owner.token, {})).statusCode).toBe(422);
    expect((await analyze(t, owner.token, { body: 'x', message: 'y' })).statusCode).toBe(422);
    // A profile id beyond PostgreSQL's integer is the caller's mistake, not a 500 (found by the OpenAPI fuzzer).
    const huge = await analyze(t, owner.token, { body: ' ', profile_id: 2147483649 });
    expect(huge.statusCode).toBe(422);
    expect(huge.json().errors).toHaveProperty('profile_id');
  });

  it('spamd down is 503 service_unavailable, never a zero score', async () => {
    const u = await createJwtUser(down, ['spam.analyze']);
    const res = await analyze(down, await token(down, u, ['spam.analyze']), { body: GTUBE });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({
      ok: false,
      reason: 'service_unavailable',
      message: expect.stringMatching(/^Spam scoring is unavailable: the scoring service cannot be reached/),
    });
    expect(res.body).not.toMatch(/"score"/);
    // Nothing about where spamd runs or how the connection failed reaches the caller.
    expect(res.body).not.toMatch(/127\.0\.0\.1|localhost|:\d{2,5}\b|ECONN|spamd/i);
  });
});

describe('SpamAssassin report table', () => {
  it('reads rules with negative and decimal scores and wrapped descriptions', () => {
    const report = [
      'Content analysis details:   (3.1 points, 5.0 required)',
      '',
      ' pts rule name              description',
      '---- ---------------------- --------------------------------------------------',
      ' 2.7 MISSING_DATE           Missing Date: header',
      '-0.0 NO_RELAYS              Informational: message was not relayed via SMTP',
      ' 0.4 HTML_MESSAGE           BODY: HTML included in message, and this description',
      '                            wraps onto a second line',
      '',
      'trailing text',
    ].join('\n');
    expect(parseRuleTable(report)).toEqual([
      { score: 2.7, name: 'MISSING_DATE', description: 'Missing Date: header' },
      { score: -0, name: 'NO_RELAYS', description: 'Informational: message was not relayed via SMTP' },
      { score: 0.4, name: 'HTML_MESSAGE', description: 'BODY: HTML included in message, and this description wraps onto a second line' },
    ]);
  });
});
