import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserLogin, createTestApp, randomName, type TestApp } from '../support/harness.js';
import { registerModelWorker } from '../support/model-workers.js';

/**
 * The workers page and the coordinator's own local runner (the quick start's, `--local`): it is
 * not offered Revoke (revoking it would stop the host's own transcription until a restart; the
 * CLI still can), and while a remote worker is online it says that it stands by (the
 * specification's rule 3) instead of "idle".
 */
let t: TestApp;
let cookie = '';

beforeAll(async () => {
  t = await createTestApp();
  const { user, password } = await t.accounts.createUser({ username: randomName('wadmin'), permissions: [], isAdmin: true });
  const { jar } = await browserLogin(t.app, user.username, password);
  cookie = jar.header();
  await registerModelWorker(t.orm, 'local', ['small'], { local: true, present: true });
});
afterAll(() => t?.close());

const row = (body: string, name: string) => new RegExp(`<tr data-worker="${name}">[\\s\\S]*?</tr>`).exec(body)?.[0] ?? '';
const page = async () => {
  const res = await t.app.inject({ method: 'GET', url: '/admin/workers', headers: { cookie } });
  expect(res.statusCode).toBe(200);
  return res.body;
};

describe('the workers page and the local runner', () => {
  it('offers no Revoke for the local runner, and says it stands by while a remote worker is online', async () => {
    let body = await page();
    expect(row(body, 'local')).toContain('idle');
    expect(row(body, 'local')).not.toContain('/revoke');
    expect(row(body, 'local')).toContain('worker:revoke');

    await registerModelWorker(t.orm, 'gpu-1', ['small'], { present: true });
    body = await page();
    expect(row(body, 'local')).toContain('data-standby="1"');
    expect(row(body, 'local')).not.toContain('>idle<');
    expect(row(body, 'gpu-1')).toContain('action="/admin/workers/gpu-1/revoke"');
    expect(row(body, 'gpu-1')).toContain('idle');
  });
});
