import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AccountRepository } from '../../coordinator/src/accounts/account-repository.js';
import { AccountService } from '../../coordinator/src/accounts/account-service.js';
import { createJwtUser, createTestApp, testEnv, type TestApp } from '../support/harness.js';

/**
 * The coordinator reuses the users and DNS API keys it looked up for AUTH_CACHE_SECONDS (see
 * coordinator/src/accounts/credential-cache.ts). Revocation must still hold: through any
 * AccountService of the process at once; made elsewhere (another process: plain SQL here) within
 * the cache's time, shown with an injected clock.
 */
let t: TestApp;

beforeAll(async () => {
  t = await createTestApp({ env: { AUTH_CACHE_SECONDS: '30' } });
});
afterAll(async () => {
  await t?.close();
});

const jobs = (auth: Record<string, string>) => t.app.inject({ method: 'GET', url: '/api/speech/jobs', headers: auth });
const zones = (key: string) => t.app.inject({ method: 'GET', url: '/api/dns/zones', headers: { 'x-api-key': key } });

describe('changes through this process apply to the next request', () => {
  it('a disabled user’s JWT is refused (401), also when it was just used', async () => {
    const u = await createJwtUser(t, ['speech.use']);
    expect((await jobs(u.auth)).statusCode).toBe(200);
    expect((await jobs(u.auth)).statusCode).toBe(200); // now cached
    await t.accounts.setDisabled(u.name, true);
    expect((await jobs(u.auth)).statusCode).toBe(401);
    // Enabling again does not bring the old JWT back.
    await t.accounts.setDisabled(u.name, false);
    expect((await jobs(u.auth)).statusCode).toBe(401);
  });

  it('a password change refuses the JWTs issued before it (401)', async () => {
    const u = await createJwtUser(t, ['speech.use']);
    expect((await jobs(u.auth)).statusCode).toBe(200);
    await t.accounts.setPassword(u.name, 'a-new-password-123');
    expect((await jobs(u.auth)).statusCode).toBe(401);
  });

  it('a revoked permission is missing from the next request (403)', async () => {
    const u = await createJwtUser(t, ['speech.use']);
    expect((await jobs(u.auth)).statusCode).toBe(200);
    await t.accounts.revokePermissions(u.name, ['speech.use']);
    expect((await jobs(u.auth)).statusCode).toBe(403);
    await t.accounts.grantPermissions(u.name, ['speech.use']);
    expect((await jobs(u.auth)).statusCode).toBe(200);
  });

  it('a revoked DNS API key is refused (401), and so is a key of a user disabled since', async () => {
    const { key, id } = await t.accounts.createDnsApiKey({ name: 'cached-global' });
    expect((await zones(key)).statusCode).toBe(200);
    expect((await zones(key)).statusCode).toBe(200);
    expect(await t.accounts.revokeDnsApiKey(id)).toBe(true);
    expect((await zones(key)).statusCode).toBe(401);

    const owner = await createJwtUser(t, []);
    const bound = await t.accounts.createDnsApiKey({ name: 'cached-bound', username: owner.name });
    expect((await zones(bound.key)).statusCode).toBe(200);
    await t.accounts.setDisabled(owner.name, true);
    expect((await zones(bound.key)).statusCode).toBe(401);
  });

  it('records last_used_at once a minute: a cached key does not send the UPDATE again on every request', async () => {
    const { key, id } = await t.accounts.createDnsApiKey({ name: 'cached-touch' });
    const touch = vi.spyOn(AccountRepository.prototype, 'touchToken');
    try {
      expect((await zones(key)).statusCode).toBe(200);
      expect((await zones(key)).statusCode).toBe(200);
      expect((await zones(key)).statusCode).toBe(200);
      expect(touch.mock.calls.filter(([, table, keyId]) => table === 'dns_api_keys' && keyId === id)).toHaveLength(1);
    } finally {
      touch.mockRestore();
    }
    const [row] = await t.orm.em.getConnection().execute<Array<{ at: unknown }>>('select last_used_at as at from dns_api_keys where id = ?', [id]);
    expect(row?.at).not.toBeNull();
  });
});

describe('changes made elsewhere apply within the cache time', () => {
  it('a user disabled by another process is still served from the cache until its entry is older than the cache time', async () => {
    let now = 1_000_000;
    const accounts = new AccountService(t.orm, { credentialCacheMs: 5_000, now: () => now });
    const u = await createJwtUser(t, ['speech.use']);
    expect(await accounts.findJwtUser(u.id, 0)).toMatchObject({ id: u.id });
    // Another process (the CLI, another coordinator) disables the user: this process hears nothing.
    await t.orm.em.getConnection().execute('update users set disabled_at = now(), token_version = token_version + 1 where id = ?', [u.id]);
    now += 4_999;
    expect(await accounts.findJwtUser(u.id, 0)).toMatchObject({ id: u.id });
    now += 1;
    expect(await accounts.findJwtUser(u.id, 0)).toBeNull();
    expect(await accounts.findActiveUser(u.id)).toBeNull();
  });

  it('a DNS API key revoked by another process is refused once its entry is older than the cache time', async () => {
    let now = 1_000_000;
    const accounts = new AccountService(t.orm, { credentialCacheMs: 5_000, now: () => now });
    const { key, id } = await t.accounts.createDnsApiKey({ name: 'elsewhere' });
    expect(await accounts.verifyDnsApiKey(key)).toMatchObject({ keyId: id });
    await t.orm.em.getConnection().execute('update dns_api_keys set revoked_at = now() where id = ?', [id]);
    now += 4_999;
    expect(await accounts.verifyDnsApiKey(key)).toMatchObject({ keyId: id });
    now += 1;
    expect(await accounts.verifyDnsApiKey(key)).toBeNull();
  });

  it('without a cache time every check reads PostgreSQL', async () => {
    const accounts = new AccountService(t.orm);
    const { key, id } = await t.accounts.createDnsApiKey({ name: 'uncached' });
    expect(await accounts.verifyDnsApiKey(key)).toMatchObject({ keyId: id });
    await t.orm.em.getConnection().execute('update dns_api_keys set revoked_at = now() where id = ?', [id]);
    expect(await accounts.verifyDnsApiKey(key)).toBeNull();
  });
});

describe('changes through another coordinator or the admin CLI arrive over Redis pub/sub', () => {
  const channel = () => `${t.config.REDIS_KEY_PREFIX}auth:credentials-changed`;

  it('a key revoked elsewhere is refused as soon as the change is announced, long before the cache time', async () => {
    const { key, id } = await t.accounts.createDnsApiKey({ name: 'announced' });
    expect((await zones(key)).statusCode).toBe(200);
    expect((await zones(key)).statusCode).toBe(200); // now cached for 30 s
    // Another process revokes it (no AccountService of this process sees it) and announces it.
    await t.orm.em.getConnection().execute('update dns_api_keys set revoked_at = now() where id = ?', [id]);
    expect((await zones(key)).statusCode).toBe(200); // not announced yet: served from the cache
    await t.redis.publish(channel(), 'another-coordinator');
    await expect.poll(async () => (await zones(key)).statusCode).toBe(401);
  });

  it('a user disabled elsewhere is refused once announced', async () => {
    const u = await createJwtUser(t, ['speech.use']);
    expect((await jobs(u.auth)).statusCode).toBe(200);
    await t.orm.em.getConnection().execute('update users set disabled_at = now(), token_version = token_version + 1 where id = ?', [u.id]);
    await t.redis.publish(channel(), 'the-admin-cli');
    await expect.poll(async () => (await jobs(u.auth)).statusCode).toBe(401);
  });

  it('a key revoked with the admin CLI is refused once its news arrives (compiled CLI; build with tsc -b first)', async () => {
    const { key, id } = await t.accounts.createDnsApiKey({ name: 'cli-revoked' });
    expect((await zones(key)).statusCode).toBe(200);
    expect((await zones(key)).statusCode).toBe(200); // cached for 30 s
    const run = await promisify(execFile)(process.execPath, ['coordinator/dist/cli.js', 'dnskey:revoke', String(id)], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: { ...process.env, ...testEnv(t.db) },
      timeout: 60_000,
    });
    expect(run.stderr).toBe('');
    await expect.poll(async () => (await zones(key)).statusCode).toBe(401);
  }, 90_000);

  it('this coordinator announces its own changes (a revocation) for the others', async () => {
    const listener = t.redis.duplicate();
    const heard: string[] = [];
    listener.on('message', (_channel: string, message: string) => heard.push(message));
    try {
      await listener.subscribe(channel());
      const { id } = await t.accounts.createDnsApiKey({ name: 'announcing' });
      expect(await t.accounts.revokeDnsApiKey(id)).toBe(true);
      await expect.poll(() => heard.length).toBeGreaterThan(0);
    } finally {
      await listener.quit();
    }
  });
});
