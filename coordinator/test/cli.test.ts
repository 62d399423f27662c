import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PERMISSIONS, TOKEN_SCOPES } from '@sonar/shared';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AccountService } from '../src/accounts/account-service.js';
import { openOrm, type Orm } from '../src/db/orm.js';
import { WorkerDirectory } from '../src/speech/workers/worker-directory.js';
import { createTestDatabase, randomName, type TestDatabase } from '../../test/support/harness.js';
import { databaseUrl, withAdminClient } from '../../test/support/infra.js';

/**
 * Runs the compiled admin CLI (coordinator/dist/cli.js; build with `npx tsc -b` first) as a child
 * process against a fresh database, and checks its effects through AccountService. Each test runs
 * several CLI processes one after another, so the tests get more time than one request needs on a
 * busy machine; a CLI process that hangs is killed and reported by cli() instead.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'coordinator/dist/cli.js');
const TEST_TIMEOUT_MS = 120_000;
const CLI_TIMEOUT_MS = 30_000;

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
}

let db: TestDatabase;
let orm: Orm;
let accounts: AccountService;

/** A minimal environment, so nothing from the developer's shell (SONAR_NEW_PASSWORD...) leaks in. */
function cli(args: string[], env: Record<string, string> = { DATABASE_URL: db.url }): Promise<CliRun> {
  return new Promise((resolve) => {
    const options = { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, timeout: CLI_TIMEOUT_MS };
    execFile(process.execPath, [CLI, ...args], options, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      if (err?.killed) stderr += `\n(cli ${args.join(' ')} did not finish within ${CLI_TIMEOUT_MS} ms and was killed)`;
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

async function createUser(extra: string[] = []) {
  const username = randomName();
  const r = await cli(['user:create', username, '--json', ...extra]);
  expect(r.code, r.stderr).toBe(0);
  return { username, run: r };
}

beforeAll(async () => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing; run \`npx tsc -b\` before this test`);
  db = await createTestDatabase();
  orm = await openOrm({ databaseUrl: db.url, poolMax: 2 });
  accounts = new AccountService(orm);
});

afterAll(async () => {
  await orm?.close(true);
  await db?.drop();
});

describe('admin CLI', { timeout: TEST_TIMEOUT_MS }, () => {
  it('lists every command in --help', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    const names = [
      'user:create',
      'user:list',
      'user:password',
      'user:admin',
      'user:disable',
      'user:enable',
      'user:grant',
      'user:revoke',
      'zone:grant',
      'zone:revoke',
      'zone:list',
      'token:create',
      'token:list',
      'token:revoke',
      'dnskey:create',
      'dnskey:list',
      'dnskey:revoke',
      'whitelist:add',
      'whitelist:remove',
      'whitelist:list',
      'db:migrate',
    ];
    for (const name of names) expect(r.stdout).toMatch(new RegExp(`^\\s+${name}\\b.*\\S`, 'm'));
  });

  it('rejects an unknown command with help and a non-zero exit', async () => {
    const r = await cli(['user:frobnicate']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("unknown command 'user:frobnicate'");
    expect(r.stderr).toContain('Usage:');
  });

  it('user:create --admin prints a generated password that signs in', async () => {
    const { username, run } = await createUser(['--admin']);
    expect(run.json.ok).toBe(true);
    expect(run.json.user).toMatchObject({ username, is_admin: true });
    expect(typeof run.json.password).toBe('string');
    const user = await accounts.authenticatePassword(username, run.json.password);
    expect(user).toMatchObject({ username, isAdmin: true });
    await expect(accounts.authenticatePassword(username, `${run.json.password}x`)).rejects.toMatchObject({ reason: 'invalid_credentials' });
  });

  it('user:create takes the password from SONAR_NEW_PASSWORD and does not echo it', async () => {
    const username = randomName();
    const r = await cli(['user:create', username, '--json'], { DATABASE_URL: db.url, SONAR_NEW_PASSWORD: 'from-the-env-123' });
    expect(r.code, r.stderr).toBe(0);
    expect(r.json).not.toHaveProperty('password');
    expect(r.stdout).not.toContain('from-the-env-123');
    expect((await accounts.authenticatePassword(username, 'from-the-env-123')).username).toBe(username);
  });

  it('user:grant with an unknown permission fails with exit 1 and names the valid permissions', async () => {
    const { username } = await createUser();
    const r = await cli(['user:grant', username, 'speech.use', 'root.everything', '--json']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: .*root\.everything/m);
    for (const p of PERMISSIONS) expect(r.stderr).toContain(p);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(r.json).toMatchObject({ ok: false, reason: 'validation_failed' });
    // Nothing was granted, not even the valid permission in the same call.
    expect((await accounts.findUser(username))?.permissions).toEqual([]);

    const ok = await cli(['user:grant', username, 'speech.use', '--json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect((await accounts.findUser(username))?.permissions).toEqual(['speech.use']);
  });

  it('zone:grant, zone:list and zone:revoke round-trip', async () => {
    const { username } = await createUser();
    expect((await cli(['zone:grant', username, 'Example.COM.', '--json'])).code).toBe(0);
    const write = await cli(['zone:grant', username, 'other.org', '--write', '--json']);
    expect(write.json).toMatchObject({ zone: 'other.org', can_read: true, can_write: true });

    const list = await cli(['zone:list', username, '--json']);
    expect(list.json.zones).toEqual([
      { zone: 'example.com', can_read: true, can_write: false },
      { zone: 'other.org', can_read: true, can_write: true },
    ]);

    expect((await cli(['zone:revoke', username, 'example.com', '--json'])).code).toBe(0);
    expect((await cli(['zone:list', username, '--json'])).json.zones).toEqual([{ zone: 'other.org', can_read: true, can_write: true }]);
    const user = await accounts.findUser(username);
    expect(await accounts.zoneRights(user!.id)).toEqual([{ zone: 'other.org', canRead: true, canWrite: true }]);

    const again = await cli(['zone:revoke', username, 'example.com']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('error:');
  });

  it('token:create prints a working token once and token:revoke disables it', async () => {
    const { username } = await createUser(['--permission', 'speech.api']);
    const created = await cli(['token:create', username, '--name', 'ci', '--scope', 'speech.api', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const secret: string = created.json.secret;
    const tokenId: number = created.json.token.id;

    const before = await accounts.verifyPersonalToken(secret);
    expect(before).toMatchObject({ tokenId, scopes: ['speech.api'], user: { username } });
    // The list shows the token but never its secret.
    const list = await cli(['token:list', username, '--json']);
    expect(list.json.tokens.map((t: { id: number }) => t.id)).toEqual([tokenId]);
    expect(list.stdout).not.toContain(secret);

    const revoked = await cli(['token:revoke', String(tokenId), '--json']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(await accounts.verifyPersonalToken(secret)).toBeNull();
  });

  it('token:create with an unknown scope fails and names the valid scopes', async () => {
    const { username } = await createUser();
    const r = await cli(['token:create', username, '--name', 'x', '--scope', 'dns.write']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('dns.write');
    for (const s of TOKEN_SCOPES) expect(r.stderr).toContain(s);
    const user = await accounts.findUser(username);
    expect(await accounts.listPersonalTokens(user!.id)).toHaveLength(0);
  });

  it('dnskey:create makes global keys without --user and user-bound keys with it', async () => {
    const { username } = await createUser();
    const [global, bound] = await Promise.all([
      cli(['dnskey:create', '--name', 'everything', '--json']),
      cli(['dnskey:create', '--name', 'mine', '--user', username, '--json']),
    ]);
    expect(global.code, global.stderr).toBe(0);
    expect(bound.code, bound.stderr).toBe(0);
    expect(global.json.key.global).toBe(true);
    expect(bound.json.key.global).toBe(false);

    const g = await accounts.verifyDnsApiKey(global.json.secret);
    expect(g).toEqual({ keyId: global.json.key.id, user: null });
    const b = await accounts.verifyDnsApiKey(bound.json.secret);
    expect(b?.keyId).toBe(bound.json.key.id);
    expect(b?.user?.username).toBe(username);

    const list = await cli(['dnskey:list', '--json']);
    const byId = new Map(list.json.keys.map((k: { id: number }) => [k.id, k]));
    expect(byId.get(global.json.key.id)).toMatchObject({ user: null, global: true });
    expect(byId.get(bound.json.key.id)).toMatchObject({ user: username, global: false });

    expect((await cli(['dnskey:revoke', String(global.json.key.id)])).code).toBe(0);
    expect(await accounts.verifyDnsApiKey(global.json.secret)).toBeNull();
    expect(await accounts.verifyDnsApiKey(bound.json.secret)).not.toBeNull();
  });

  it('whitelist:add, whitelist:list and whitelist:remove; an invalid CIDR is rejected', async () => {
    const added = await cli(['whitelist:add', '192.0.2.0/24', '--note', 'lab', '--json']);
    expect(added.code, added.stderr).toBe(0);
    expect(added.json.entry).toMatchObject({ cidr: '192.0.2.0/24', note: 'lab' });
    expect(await accounts.isWhitelisted('192.0.2.77')).toBe(true);

    const bad = await cli(['whitelist:add', '192.0.2.0/33', '--json']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error: .*192\.0\.2\.0\/33/m);

    const list = await cli(['whitelist:list', '--json']);
    expect(list.json.entries.map((e: { cidr: string }) => e.cidr)).toEqual(['192.0.2.0/24']);

    expect((await cli(['whitelist:remove', '192.0.2.0/24', '--json'])).code).toBe(0);
    expect((await cli(['whitelist:list', '--json'])).json.entries).toEqual([]);
    expect(await accounts.isWhitelisted('192.0.2.77')).toBe(false);
    expect((await cli(['whitelist:remove', '192.0.2.0/24'])).code).toBe(1);

    // Ranges are stored as their canonical network, so two spellings are one entry.
    await cli(['whitelist:add', '10.9.8.7/8', '--json']);
    const again = await cli(['whitelist:add', '10.0.0.0/8', '--note', 'renamed', '--json']);
    expect(again.json.entry).toMatchObject({ cidr: '10.0.0.0/8', note: 'renamed' });
    expect((await cli(['whitelist:list', '--json'])).json.entries).toHaveLength(1);
  });

  it('worker:create prints a secret the coordinator accepts; rotate and revoke take effect', async () => {
    const workers = new WorkerDirectory(orm, 45_000);
    const created = await cli(['worker:create', 'gpu-a', '--json']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.json.secret).toMatch(/^sonar_wrk_/);
    expect((await workers.authenticate(created.json.secret))?.name).toBe('gpu-a');
    expect((await cli(['worker:create', 'gpu-a'])).code).toBe(1);

    const rotated = await cli(['worker:rotate', 'gpu-a', '--json']);
    expect(await workers.authenticate(created.json.secret)).toBeNull();
    expect((await workers.authenticate(rotated.json.secret))?.name).toBe('gpu-a');

    expect((await cli(['worker:revoke', 'gpu-a'])).code).toBe(0);
    expect(await workers.authenticate(rotated.json.secret)).toBeNull();
    const list = await cli(['worker:list', '--json']);
    expect(list.json.workers).toMatchObject([{ name: 'gpu-a', revoked: true, last_seen_at: null }]);
    expect((await cli(['worker:revoke', 'nope'])).code).toBe(1);
  });

  it('exits 78 naming DATABASE_URL when it is missing or invalid', async () => {
    // An empty data folder: no quick start database to fall back to.
    const missing = await cli(['user:list', '--json'], { SONAR_DATA_DIR: mkdtempSync(path.join(tmpdir(), 'sonar-cli-')) });
    expect(missing.code).toBe(78);
    expect(missing.stderr).toContain('DATABASE_URL');
    const invalid = await cli(['user:list'], { DATABASE_URL: 'mysql://localhost/sonar' });
    expect(invalid.code).toBe(78);
    expect(invalid.stderr).toContain('DATABASE_URL');
  });

  it('on an empty database a command says to run db:migrate; after db:migrate commands work', async () => {
    const admin = inject('pgAdminUrl');
    const name = `${inject('templateDatabase')}_empty`;
    await withAdminClient(admin, (c) => c.query(`create database ${name}`));
    try {
      const env = { DATABASE_URL: databaseUrl(admin, name) };
      const refused = await cli(['user:create', 'first', '--admin', '--json'], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^error: the database has no sonar schema yet; run `npm run cli -- db:migrate`/m);
      expect(refused.stderr).not.toMatch(/\n\s+at /); // no stack trace
      expect(refused.json).toMatchObject({ ok: false, reason: 'schema_not_current' });

      const migrated = await cli(['db:migrate', '--json'], env);
      expect(migrated.code, migrated.stderr).toBe(0);
      expect(migrated.json.applied).toContain('Migration20261121000100Accounts');
      expect((await cli(['db:migrate', '--json'], env)).json).toEqual({ ok: true, applied: [] });

      const created = await cli(['user:create', 'first', '--admin', '--json'], env);
      expect(created.code, created.stderr).toBe(0);
      const list = await cli(['user:list', '--json'], env);
      expect(list.json.users).toMatchObject([{ username: 'first', is_admin: true, disabled: false }]);
    } finally {
      await withAdminClient(admin, (c) => c.query(`drop database if exists ${name} with (force)`));
    }
  });
});

describe('chat-log commands', { timeout: TEST_TIMEOUT_MS }, () => {
  it('imports the quick start sample the README points at (deploy/samples/irc)', async () => {
    const sample = path.resolve(import.meta.dirname, '../../deploy/samples/irc');
    const imported = await cli(['irc:import', sample, '--network', 'example', '--source', 'production', '--json']);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.json).toMatchObject({ ok: true, files: 2, formats: { znc: 2 } });
    expect(imported.json.inserted).toBeGreaterThan(15);
    const links = await cli(['irc:alias:list', '--network', 'example', '--json']);
    expect(links.json.links).toContainEqual({ network: 'example', nick: 'linus', alias: 'linus_afk', origin: 'log', blocked: false });
  });

  it('imports logs of mixed formats with detection, then links, lists and unlinks nicks', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cli-irc-'));
    writeFileSync(path.join(dir, '#lab_20240310.log'), '[10:00:00] <ann> hi\n[10:01:00] *** ann is now known as ann_\n');
    writeFileSync(path.join(dir, 'irc.testnet.#lab.weechatlog'), '2024-03-11 09:00:00\tann_\tmorning\n2024-03-11 09:00:05\tben\tann_: hello\n');
    writeFileSync(path.join(dir, 'notes.txt'), 'just some text\nnot a log\n');
    const imported = await cli(['irc:import', dir, '--network', 'testnet', '--source', 'production', '--json']);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.json).toMatchObject({ ok: true, files: 2, lines: 4, inserted: 4, formats: { znc: 1, weechat: 1 } });
    expect(imported.json.ignoredFiles).toEqual([{ path: path.join(dir, 'notes.txt'), reason: expect.stringMatching(/^not a known chat-log format/) }]);
    const again = await cli(['irc:import', dir, '--network', 'testnet', '--source', 'production']);
    expect(again.stdout).toContain('inserted 0, skipped 4');

    const learnt = await cli(['irc:alias:list', '--network', 'testnet', '--json']);
    expect(learnt.json.links).toEqual([{ network: 'testnet', nick: 'ann', alias: 'ann_', origin: 'log', blocked: false }]);
    expect((await cli(['irc:alias:add', 'ben', 'benny', '--network', 'testnet'])).stdout).toContain('linked ben and benny on testnet (production)');
    const removed = await cli(['irc:alias:remove', 'ann_', 'ann', '--network', 'testnet', '--json']);
    expect(removed.json).toMatchObject({ ok: true, removed: true });
    const listed = await cli(['irc:alias:list', '--network', 'testnet']);
    expect(listed.stdout).toMatch(/ann\s+ann_\s+admin\s+removed/);
    expect(listed.stdout).toMatch(/ben\s+benny\s+admin\s+linked/);
    const unknown = await cli(['irc:alias:add', 'a', 'b', '--network', 'nonet']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('no network "nonet" in the production archive');
  });

  it('exits 2 when lines match no parser or logs cannot be placed, and undoes an import by batch', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cli-irc-undo-'));
    writeFileSync(path.join(dir, '#undo_20240310.log'), '[10:00:00] <ann> hi\n<<<<<<< HEAD\n[10:01:00] <ann> there\n');
    const dry = await cli(['irc:import', dir, '--network', 'undo', '--source', 'production', '--dry-run']);
    expect(dry.code).toBe(2);
    expect(dry.stdout).toContain('dry run (nothing written): files 1, lines 3, would insert 2');
    expect(dry.stdout).toContain('  line 2: <<<<<<< HEAD');
    expect((await cli(['irc:imports', '--network', 'undo'])).stdout).toContain('no import batches');
    const imported = await cli(['irc:import', dir, '--network', 'undo', '--source', 'production', '--allow-unparsed', '--json']);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.json).toMatchObject({ inserted: 2, unparsed: 1, problems: [], unparsedFiles: [{ count: 1, lines: [{ lineNo: 2 }] }] });
    const batch = imported.json.batchId as number;
    expect((await cli(['irc:imports', '--network', 'undo'])).stdout).toMatch(
      new RegExp(`^${batch}\\s.*undo \\(production\\)\\s+1\\s+3\\s+2\\s+2\\s+1\\s+done`, 'm'),
    );
    expect((await cli(['irc:delete', '--network', 'undo', '--from', '2024-03-10', '--to', '2024-03-10', '--dry-run'])).stdout).toContain(
      'would delete 2 row(s)',
    );
    expect((await cli(['irc:import:revert', String(batch)])).stdout).toContain(`removed 2 row(s) of batch ${batch} (undo)`);
    expect((await cli(['irc:import:revert', 'x'])).code).not.toBe(0);

    mkdirSync(path.join(dir, 'days', '2024', '03'), { recursive: true });
    writeFileSync(path.join(dir, 'days', '2024', '03', '11.log'), '[10:00:00] <ann> dated\n');
    writeFileSync(path.join(dir, 'days', '2024', '03', '12.log'), '[10:00:00] <ann> dated\n');
    const nochan = await cli(['irc:import', path.join(dir, 'days'), '--network', 'undo', '--source', 'production']);
    expect(nochan.code).toBe(2);
    expect(nochan.stdout).toMatch(/not imported: .*11\.log: .*pass --channel/);
    const twoDays = await cli(['irc:import', path.join(dir, 'days'), '--network', 'undo', '--source', 'production', '--date', '2024-03-11', '--channel', '#d']);
    expect(twoDays.code).not.toBe(0);
    expect(twoDays.stderr).toContain('--date gives the day of one file, but 2 files were given');
    const placed = await cli([
      'irc:import',
      path.join(dir, 'days'),
      '--network',
      'undo',
      '--source',
      'production',
      '--path',
      '{yyyy}/{mm}/{dd}.log',
      '--channel',
      '#d',
    ]);
    expect(placed.code, placed.stdout).toBe(0);
    expect(placed.stdout).toContain('inserted 2');
  });
});
