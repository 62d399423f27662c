#!/usr/bin/env node
import { PERMISSIONS, TOKEN_SCOPES } from '@sonar/shared';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { AccountService } from './accounts/account-service.js';
import type { DnsApiKey, DnsIpWhitelistEntry } from './accounts/entities.js';
import { generatePassword } from './accounts/password.js';
import { presentToken, presentUser } from './accounts/presenters.js';
import type { AuthUser } from './accounts/types.js';
import { ConfigError, envSchema } from './config.js';
import type { Orm } from './db/orm.js';
import { AppError } from './http/errors.js';
import { IRC_IMPORT_FORMATS, IRC_SOURCES, IrcImportService, type IrcSource } from './irc/import-service.js';
import type { IrcLoggerConfig } from './irc/live-logger.js';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Admin CLI: `npm run cli -- <command>`. Every change goes through AccountService so the CLI obeys
 * the same rules as the HTTP API. Needs only DATABASE_URL. Commands do not migrate: they check in
 * one query that the schema is current and otherwise say to run `db:migrate` (the coordinator
 * also migrates when it starts). The ORM and the services are imported only by the commands that
 * use them, so --help and argument errors answer at once.
 */

const EX_CONFIG = 78;

/** What a command produced: `json` for --json (one object), `text` lines for people. */
type Result = { json: Record<string, unknown>; text: string[] };

const program = new Command('sonar-cli')
  .description('Administer sonar users, permissions, zone rights, tokens, DNS API keys, the DNS IP whitelist and worker agents.')
  .option('--json', 'print one machine-readable JSON object instead of text')
  .showHelpAfterError();

const jsonMode = () => program.opts<{ json?: boolean }>().json === true;

/**
 * Without DATABASE_URL, a quick start's embedded database is used when its secrets exist
 * (`npm start` must be running for it to answer).
 */
function quickstartDatabaseUrl(): string | undefined {
  const dataDir = path.resolve(process.env.SONAR_DATA_DIR ?? fileURLToPath(new URL('../../.data', import.meta.url)));
  const file = path.join(dataDir, 'secrets.json');
  if (!existsSync(file)) return undefined;
  const { EMBEDDED_PG_PASSWORD } = JSON.parse(readFileSync(file, 'utf8')) as { EMBEDDED_PG_PASSWORD?: string };
  if (!EMBEDDED_PG_PASSWORD) return undefined;
  const port = Number(process.env.EMBEDDED_PG_PORT ?? 54329);
  console.error(`note: DATABASE_URL is not set; using the quick start's embedded database on 127.0.0.1:${port}`);
  return `postgres://postgres:${encodeURIComponent(EMBEDDED_PG_PASSWORD)}@127.0.0.1:${port}/sonar`;
}

/** The database's schema is behind this CLI: a command would fail on missing tables or columns. */
class SchemaNotCurrent extends Error {}

/**
 * Wraps a command: open the database, check that its schema is current (or, with
 * `migrate: true`, bring it up to date), run the command through a service, print, always close.
 */
function runWith<S>(make: (orm: Orm) => S | Promise<S>, opts: { migrate?: boolean } = {}) {
  return <A extends unknown[]>(fn: (svc: S, ...args: A) => Promise<Result>) =>
    async (...args: A) => {
      // Reuse the coordinator's own rule for DATABASE_URL; nothing else from the environment is needed.
      const given = process.env.DATABASE_URL || undefined;
      const env = envSchema.pick({ DATABASE_URL: true }).safeParse({ DATABASE_URL: given ?? quickstartDatabaseUrl() });
      if (!env.success) {
        const why = given ? `is invalid (${env.error.issues[0]?.message})` : 'is not set';
        console.error(`error: DATABASE_URL ${why}; set it to the coordinator's postgres:// URL`);
        process.exitCode = EX_CONFIG;
        return;
      }
      let orm: Orm | undefined;
      try {
        const db = await import('./db/orm.js');
        orm = await db.openOrm({ databaseUrl: env.data.DATABASE_URL, poolMax: 2, migrator: opts.migrate === true });
        if (!opts.migrate) {
          const pending = await db.pendingMigrations(orm);
          if (pending.length) {
            const fresh = pending.length === db.MIGRATION_COUNT;
            throw new SchemaNotCurrent(
              `${fresh ? 'the database has no sonar schema yet' : `the database schema is behind: ${pending.length} migration(s) not applied (${pending.join(', ')})`}; ` +
                'run `npm run cli -- db:migrate` (or start the coordinator, which migrates on start)',
            );
          }
        }
        const result = await fn(await make(orm), ...args);
        if (jsonMode()) console.log(JSON.stringify({ ok: true, ...result.json }, null, 2));
        else for (const line of result.text) console.log(line);
      } catch (err) {
        process.exitCode = reportError(err, await isDriverError(err));
      } finally {
        await orm?.close(true);
      }
    };
}

/** A database error (MikroORM wraps the driver's); asked only on failure, when the ORM is mostly loaded anyway. */
async function isDriverError(err: unknown): Promise<boolean> {
  // pg's own DatabaseError (a refused login while connecting) carries the server's severity.
  if (err instanceof Error && typeof (err as { severity?: unknown }).severity === 'string') return true;
  const { DriverException } = await import('@mikro-orm/core');
  return err instanceof DriverException;
}

const run = runWith(async (orm) => new (await import('./accounts/account-service.js')).AccountService(orm));
// Presence freshness does not matter to the CLI's listing beyond "seen recently"; use the default TTL.
const runWorkers = runWith(async (orm) => new (await import('./speech/workers/worker-directory.js')).WorkerDirectory(orm, 45_000));
const dnsEnv = () =>
  envSchema
    .pick({
      DNS_CACHE_TTL_SECONDS: true,
      DNS_DEFAULT_TTL: true,
      DNS_ACME_TTL: true,
      DNS_TIMEOUT_MS: true,
      DNS_CLOUDFLARE_API_URL: true,
      DNS_CLOUDFLARE_TOKEN_REF: true,
      DNS_PROVIDER_LEGACY_FILE: true,
      DNS_PROVIDER_DETECT_TTL_SECONDS: true,
    })
    .parse(Object.fromEntries(Object.entries(process.env).filter(([k, v]) => k.startsWith('DNS_') && v)));
const runDns = runWith(async (orm) => new (await import('./dns/dns-service.js')).DnsService(orm, dnsEnv()));
const runDyndns = runWith(async (orm) => {
  const [{ AccountService }, { DnsService }, { DyndnsService }, { DyndnsTokens }] = await Promise.all([
    import('./accounts/account-service.js'),
    import('./dns/dns-service.js'),
    import('./platform/dyndns/dyndns-service.js'),
    import('./platform/dyndns/dyndns-tokens.js'),
  ]);
  const accounts = new AccountService(orm);
  const dyndnsEnv = envSchema
    .pick({ DYNDNS_TTL: true, DYNDNS_NOCHG_LIMIT: true, DYNDNS_NOCHG_WINDOW_SECONDS: true, DYNDNS_ABUSE_BLOCK_SECONDS: true })
    .parse(Object.fromEntries(Object.entries(process.env).filter(([k, v]) => k.startsWith('DYNDNS_') && v)));
  const dyndns = new DyndnsService(new DyndnsTokens(orm), new DnsService(orm, dnsEnv()), accounts, dyndnsEnv);
  return { accounts, dyndns };
});

/** Expected failures get one clear line (no stack); anything else is a bug and keeps its stack. */
function reportError(err: unknown, driverError: boolean): number {
  if (err instanceof SchemaNotCurrent) {
    console.error(`error: ${err.message}`);
    if (jsonMode()) console.log(JSON.stringify({ ok: false, reason: 'schema_not_current', message: err.message }, null, 2));
    return 1;
  }
  if (err instanceof AppError) {
    const errors = err.details.errors ?? {};
    // The service names only the bad values; tell the operator what would have been accepted.
    const hint = errors.permissions ? `valid permissions: ${PERMISSIONS.join(', ')}` : errors.scopes ? `valid scopes: ${TOKEN_SCOPES.join(', ')}` : undefined;
    console.error(`error: ${err.message}`);
    for (const [field, messages] of Object.entries(errors)) {
      for (const m of messages) if (m !== err.message) console.error(`  ${field}: ${m}`);
    }
    if (hint) console.error(`  ${hint}`);
    if (jsonMode()) console.log(JSON.stringify({ ok: false, reason: err.reason, message: err.message, errors, ...(hint ? { hint } : {}) }, null, 2));
    return 1;
  }
  if (err instanceof Error && err.name === 'AssistantError') {
    // The connector's own errors (assistant/assistant-service.ts): a code and a message for people.
    const code = (err as Error & { code: string }).code;
    console.error(`error: ${err.message}`);
    if (jsonMode()) console.log(JSON.stringify({ ok: false, reason: code, message: err.message }, null, 2));
    return 1;
  }
  if (err instanceof Error && (driverError || (err as { code?: string }).code === 'ECONNREFUSED')) {
    // Driver messages start with the whole SQL statement; the reason is after the last " - ".
    const { message } = err;
    const cut = message.lastIndexOf(' - ');
    console.error(`error: database: ${cut < 0 ? message : message.slice(cut + 3)}`);
    return 1;
  }
  console.error(err);
  return 1;
}

function fail(reason: 'not_found' | 'validation_failed', message: string): never {
  throw new AppError(reason, message);
}

async function requireUser(svc: AccountService, username: string): Promise<AuthUser> {
  return (await svc.findUser(username)) ?? fail('not_found', `no user named "${username}"`);
}

function positiveInt(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError('must be a positive whole number');
  return Number(value);
}

/** Pads columns so lists read as a table; `empty` is printed when there are no rows. */
function table(header: string[], rows: string[][], empty: string): string[] {
  if (!rows.length) return [empty];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  return [header, ...rows].map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd(),
  );
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const day = (iso: string | null) => iso?.slice(0, 10) ?? '-';
/** Secrets are stored hashed, so this is the only time the operator can see them. */
const shownOnce = (what: string, secret: string) => [`${what}: ${secret}`, `note: the ${what} is not shown again; store it now`];
const describeUser = (u: AuthUser) => `${u.username} (id ${u.id}${u.isAdmin ? ', admin' : ''}) permissions: ${u.permissions.join(', ') || '-'}`;
const presentKey = (k: DnsApiKey) => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  user: k.user?.username ?? null,
  global: !k.user,
  created_at: iso(k.createdAt),
  expires_at: iso(k.expiresAt),
  last_used_at: iso(k.lastUsedAt),
  revoked_at: iso(k.revokedAt),
});
const presentEntry = (e: DnsIpWhitelistEntry) => ({ id: e.id, cidr: e.cidr, note: e.note, created_at: iso(e.createdAt) });
const passwordOption = () => new Option('--password <password>', 'password to set (generated and printed when omitted)').env('SONAR_NEW_PASSWORD');

// ---- database ---------------------------------------------------------------------------------

program
  .command('db:migrate')
  .description('apply pending database migrations (needed once on a new database and after an upgrade; the coordinator also applies them when it starts)')
  .action(
    runWith((orm) => orm, { migrate: true })(async (orm) => {
      const { migrate } = await import('./db/orm.js');
      const applied = await migrate(orm);
      return { json: { applied }, text: applied.length ? applied.map((name) => `applied ${name}`) : ['the database schema is up to date'] };
    }),
  );

// ---- users ------------------------------------------------------------------------------------

program
  .command('user:create <username>')
  .description('create a user (prints a generated password when none is given)')
  .addOption(passwordOption())
  .option('--email <email>', 'e-mail address')
  .option('--admin', 'make the user an administrator')
  .option('--permission <permission...>', `permissions to grant (${PERMISSIONS.join(', ')})`)
  .action(
    run(async (svc, username: string, o: { password?: string; email?: string; admin?: boolean; permission?: string[] }) => {
      const { user, password } = await svc.createUser({ username, password: o.password, email: o.email, isAdmin: !!o.admin, permissions: o.permission });
      const generated = o.password === undefined;
      return {
        json: { user: presentUser(user), ...(generated ? { password } : {}) },
        text: [`created ${describeUser(user)}`, ...(generated ? shownOnce('password', password) : [])],
      };
    }),
  );

program
  .command('user:list')
  .description('list all users')
  .action(
    run(async (svc) => {
      // AuthUser carries no disabled flag; findActiveUser (null when disabled) is the service's way to ask.
      const users = await Promise.all((await svc.listUsers()).map(async (u) => ({ ...presentUser(u), disabled: !(await svc.findActiveUser(u.id)) })));
      return {
        json: { users },
        text: table(
          ['ID', 'USERNAME', 'ADMIN', 'DISABLED', 'EMAIL', 'PERMISSIONS'],
          users.map((u) => [String(u.id), u.username, u.is_admin ? 'yes' : 'no', u.disabled ? 'yes' : 'no', u.email ?? '-', u.permissions.join(',') || '-']),
          'no users',
        ),
      };
    }),
  );

program
  .command('user:password <username>')
  .description("set a user's password (generates and prints one when none is given); ends their sessions")
  .addOption(passwordOption())
  .action(
    run(async (svc, username: string, o: { password?: string }) => {
      const password = o.password ?? generatePassword();
      await svc.setPassword(username, password);
      const generated = o.password === undefined;
      return {
        json: { username, ...(generated ? { password } : {}) },
        text: [`password of ${username} changed`, ...(generated ? shownOnce('password', password) : [])],
      };
    }),
  );

program
  .command('user:admin <username>')
  .description('grant (--on) or remove (--off) administrator rights')
  .addOption(new Option('--on', 'make the user an administrator').conflicts('off'))
  .addOption(new Option('--off', 'remove administrator rights'))
  .action(
    run(async (svc, username: string, o: { on?: boolean; off?: boolean }) => {
      if (!o.on && !o.off) fail('validation_failed', 'say --on or --off');
      const user = await svc.setAdmin(username, !!o.on);
      return { json: { user: presentUser(user) }, text: [`${user.username} is ${user.isAdmin ? 'now' : 'no longer'} an administrator`] };
    }),
  );

for (const [name, disabled] of [
  ['user:disable', true],
  ['user:enable', false],
] as const) {
  program
    .command(`${name} <username>`)
    .description(disabled ? 'disable a user (ends their sessions; tokens stop working)' : 'enable a disabled user')
    .action(
      run(async (svc, username: string) => {
        const user = await svc.setDisabled(username, disabled);
        return { json: { user: { ...presentUser(user), disabled } }, text: [`${user.username} ${disabled ? 'disabled' : 'enabled'}`] };
      }),
    );
}

for (const [name, grant] of [
  ['user:grant', true],
  ['user:revoke', false],
] as const) {
  program
    .command(`${name} <username> <permission...>`)
    .description(grant ? `grant permissions (${PERMISSIONS.join(', ')})` : 'revoke permissions')
    .action(
      run(async (svc, username: string, permissions: string[]) => {
        const user = await (grant ? svc.grantPermissions(username, permissions) : svc.revokePermissions(username, permissions));
        return { json: { user: presentUser(user) }, text: [describeUser(user)] };
      }),
    );
}

// ---- DNS zone rights --------------------------------------------------------------------------

program
  .command('zone:grant <username> <zone>')
  .description('give a user read access to a DNS zone (read and write with --write)')
  .option('--write', 'also allow changes')
  .action(
    run(async (svc, username: string, zone: string, o: { write?: boolean }) => {
      const rights = await svc.grantZone(username, zone, { read: true, write: !!o.write });
      return { json: { username, ...rights }, text: [`${username}: ${rights.zone} ${rights.can_write ? 'read/write' : 'read-only'}`] };
    }),
  );

program
  .command('zone:revoke <username> <zone>')
  .description("remove a user's rights on a DNS zone")
  .action(
    run(async (svc, username: string, zone: string) => {
      if (!(await svc.revokeZone(username, zone))) fail('not_found', `${username} has no rights on zone "${zone}"`);
      return { json: { username, zone }, text: [`${username}: rights on ${zone} removed`] };
    }),
  );

program
  .command('zone:list <username>')
  .description("list a user's DNS zone rights")
  .action(
    run(async (svc, username: string) => {
      const user = await requireUser(svc, username);
      const zones = (await svc.zoneRights(user.id)).map((z) => ({ zone: z.zone, can_read: z.canRead, can_write: z.canWrite }));
      return {
        json: { username: user.username, zones },
        text: table(
          ['ZONE', 'ACCESS'],
          zones.map((z) => [z.zone, z.can_write ? 'read/write' : 'read-only']),
          `${user.username} has no zone rights`,
        ),
      };
    }),
  );

// ---- DNS zone registry and maintenance -------------------------------------------------------

function nonNegativeInt(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
  return Number(value);
}

program
  .command('dns:zone:add <zone>')
  .description('register (or replace) a zone the DNS API serves: its zone file, TSIG key file and master server')
  .requiredOption('--file <path>', 'zone file path (method=file reads it; must be readable by the coordinator)')
  .requiredOption('--key-file <path>', 'TSIG key file (tsig-keygen output) used for AXFR and UPDATE')
  .option('--server <host>', 'master server address', '127.0.0.1')
  .option('--port <port>', 'master server port', positiveInt, 53)
  .option('--cache-ttl <seconds>', 'cache TTL for this zone (default: DNS_CACHE_TTL_SECONDS)', nonNegativeInt)
  .option('--no-invalidate', 'refuse manual cache clears (cache_invalidation_disabled)')
  .option('--invalidate-interval <seconds>', 'treat a cache older than this as expired (0 = never)', nonNegativeInt, 0)
  .option('--protect-from-clear', 'refuse full cache clears (cache_clear_protected)')
  .action(
    runDns(
      async (
        dns,
        zone: string,
        o: {
          file: string;
          keyFile: string;
          server: string;
          port: number;
          cacheTtl?: number;
          invalidate: boolean;
          invalidateInterval: number;
          protectFromClear?: boolean;
        },
      ) => {
        const z = await dns.zones.upsert({
          zone,
          file: o.file,
          keyFile: o.keyFile,
          server: o.server,
          port: o.port,
          cacheTtlSeconds: o.cacheTtl ?? null,
          invalidateEnabled: o.invalidate,
          invalidateIntervalSeconds: o.invalidateInterval,
          protectFromClear: !!o.protectFromClear,
        });
        const { checkPaths } = await import('./dns/zone-registry.js');
        const warn = await checkPaths(z).then(
          () => [],
          (e: unknown) => [`warning: ${e instanceof Error ? e.message : String(e)}`],
        );
        return {
          json: { zone: z.zone, file: z.filePath, key: z.keyPath, server: z.server, port: z.port },
          text: [`zone ${z.zone} registered (${z.server}:${z.port})`, ...warn],
        };
      },
    ),
  );

program
  .command('dns:zone:list')
  .description('list the zones the DNS API serves')
  .action(
    runDns(async (dns) => {
      const zones = (await dns.zones.list()).map((z) => ({
        zone: z.zone,
        server: z.server,
        port: z.port,
        file: z.filePath,
        key: z.keyPath,
        cache_ttl_seconds: z.cacheTtlSeconds,
        invalidate_enabled: z.invalidateEnabled,
        invalidate_interval_seconds: z.invalidateIntervalSeconds,
        protect_from_clear: z.protectFromClear,
      }));
      return {
        json: { zones },
        text: table(
          ['ZONE', 'MASTER', 'FILE', 'KEY'],
          zones.map((z) => [z.zone, z.file === null ? '(provider zone)' : `${z.server}:${z.port}`, z.file ?? '-', z.key ?? '-']),
          'no zones registered',
        ),
      };
    }),
  );

program
  .command('dns:zone:remove <zone>')
  .description('stop serving a zone (its cache rows are dropped; the zone on the master is untouched)')
  .action(
    runDns(async (dns, zone: string) => {
      if (!(await dns.zones.remove(zone))) fail('not_found', `zone "${zone}" is not registered`);
      return { json: { zone }, text: [`zone ${zone} removed`] };
    }),
  );

// ---- DNS provider zones ------------------------------------------------------------------------

program
  .command('dns:providers:list')
  .description('list provider zones: mapping rows, the imported older host-side config, NS-detected zones')
  .action(
    runDns(async (dns) => {
      const dir = dns.providers.directory;
      const [mappings, legacy] = await Promise.all([dir.listMappings(), dir.importLegacy()]);
      const saved = new Set(mappings.map((m) => m.zone));
      const rows = [
        ...mappings.map((m) => ({ zone: m.zone, provider: m.provider, provider_zone_id: m.providerZoneId, token_ref: m.tokenRef, source: 'mapping' })),
        ...legacy
          .filter((l) => !saved.has(l.zone))
          .map((l) => ({ zone: l.zone, provider: 'cloudflare', provider_zone_id: l.providerZoneId, token_ref: l.tokenRef, source: `imported (${l.origin})` })),
      ];
      const detected: Array<Record<string, string | boolean>> = [];
      for (const z of await dns.zones.list()) {
        if (z.filePath === null) continue;
        const b = await dir.binding(z);
        if (b?.source === 'detected')
          detected.push({
            zone: z.zone,
            provider: b.provider,
            provider_zone_id: b.providerZoneId ?? '',
            token_ref: b.tokenRef,
            source: 'detected',
            ready: b.ready,
          });
      }
      const all = [...rows, ...detected];
      return {
        json: { providers: all },
        text: table(
          ['ZONE', 'PROVIDER', 'ZONE ID', 'TOKEN REF', 'SOURCE'],
          all.map((r) => [String(r.zone), String(r.provider), String(r.provider_zone_id) || '-', String(r.token_ref), String(r.source)]),
          'no provider zones',
        ),
      };
    }),
  );

program
  .command('dns:providers:add <zone>')
  .description('map a zone to an external DNS provider (replaces an existing mapping); the zone id is looked up when omitted')
  .requiredOption('--token-ref <ref>', 'where the API token is: env:NAME, file:/path or file:/path#KEY (never the token itself)')
  .option('--provider <key>', 'provider key', 'cloudflare')
  .option('--zone-id <id>', 'zone id at the provider (default: looked up by name with the token)')
  .action(
    runDns(async (dns, zone: string, o: { tokenRef: string; provider: string; zoneId?: string }) => {
      const m = await dns.providers.directory.saveMapping({
        zone,
        provider: o.provider,
        tokenRef: o.tokenRef,
        ...(o.zoneId ? { providerZoneId: o.zoneId } : {}),
      });
      return {
        json: { zone: m.zone, provider: m.provider, provider_zone_id: m.providerZoneId, token_ref: m.tokenRef },
        text: [`zone ${m.zone} mapped to ${m.provider} zone ${m.providerZoneId} (token from ${m.tokenRef})`],
      };
    }),
  );

program
  .command('dns:providers:import')
  .description('save the imported older host-side provider config (DNS_PROVIDER_LEGACY_FILE or CLOUDFLARE_* environment) as mapping rows')
  .action(
    runDns(async (dns) => {
      const dir = dns.providers.directory;
      const saved = [];
      for (const l of await dir.importLegacy())
        saved.push(await dir.saveMapping({ zone: l.zone, provider: 'cloudflare', providerZoneId: l.providerZoneId, tokenRef: l.tokenRef }));
      return {
        json: { saved: saved.map((m) => ({ zone: m.zone, provider_zone_id: m.providerZoneId, token_ref: m.tokenRef })) },
        text: saved.length
          ? saved.map((m) => `zone ${m.zone} saved as a mapping (${m.providerZoneId}, token from ${m.tokenRef})`)
          : ['no older provider config found'],
      };
    }),
  );

program
  .command('dns:providers:remove <zone>')
  .description('remove a provider mapping (a zone without zone file goes too, with its cache)')
  .action(
    runDns(async (dns, zone: string) => {
      if (!(await dns.providers.directory.removeMapping(zone))) fail('not_found', `zone "${zone}" has no provider mapping`);
      return { json: { zone }, text: [`provider mapping of ${zone} removed`] };
    }),
  );

program
  .command('dns:acme:cleanup-stale <domain>')
  .description('remove stale _acme-challenge TXT values at <domain> (same logic as POST /api/dns/acme/cleanup-stale)')
  .option('--keep <challenge...>', 'challenge values to keep')
  .option('--dry-run', 'only list what would be removed')
  .option('--refresh-zone-cache', 'refresh the zone cache afterwards')
  .action(
    runDns(async (dns, domain: string, o: { keep?: string[]; dryRun?: boolean; refreshZoneCache?: boolean }) => {
      const { acmeOwner } = await import('./dns/dns-service.js');
      // A provider zone (mapping, imported config, NS detection) is bound to its provider; a local one needs readable paths.
      const zone = await dns.bind((await dns.zones.zoneFor(acmeOwner(domain))) ?? fail('not_found', `${acmeOwner(domain)} is not inside any registered zone`));
      const r = await dns.acmeCleanupStale(domain, { keep: o.keep ?? [], dryRun: !!o.dryRun, refreshZoneCache: !!o.refreshZoneCache }, zone);
      if (r.errors.length) process.exitCode = 1;
      return {
        json: { ...r },
        text: [
          `${r.owner} (zone ${r.zone})${r.dry_run ? ' [dry run]' : ''}: ${r.dry_run ? 'would remove' : 'removed'} ${r.removed_count}, kept ${r.kept.length}`,
          ...r.removed.map((v) => `  - ${v}`),
          ...r.errors.map((e) => `error: ${e}`),
        ],
      };
    }),
  );

// ---- personal access tokens -------------------------------------------------------------------

program
  .command('token:create <username>')
  .description("create a user's personal access token (printed once)")
  .requiredOption('--name <name>', 'label for the token')
  .requiredOption('--scope <scope...>', `scopes (${TOKEN_SCOPES.join(', ')})`)
  .option('--expires-days <days>', 'expire after this many days (default: never)', positiveInt)
  .action(
    run(async (svc, username: string, o: { name: string; scope: string[]; expiresDays?: number }) => {
      const user = await requireUser(svc, username);
      const { token, record, callbackSecret } = await svc.createPersonalToken(user.id, { name: o.name, scopes: o.scope, expiresInDays: o.expiresDays });
      return {
        json: { secret: token, callback_secret: callbackSecret, token: presentToken(record) },
        text: [`created token ${record.id} for ${user.username}`, ...shownOnce('token', token), ...shownOnce('callback signing secret', callbackSecret)],
      };
    }),
  );

program
  .command('token:list <username>')
  .description("list a user's personal access tokens")
  .action(
    run(async (svc, username: string) => {
      const user = await requireUser(svc, username);
      const tokens = (await svc.listPersonalTokens(user.id)).map(presentToken);
      return {
        json: { username: user.username, tokens },
        text: table(
          ['ID', 'NAME', 'PREFIX', 'SCOPES', 'EXPIRES', 'LAST USED', 'REVOKED'],
          tokens.map((t) => [String(t.id), t.name, t.prefix, t.scopes.join(','), day(t.expires_at), day(t.last_used_at), day(t.revoked_at)]),
          `${user.username} has no tokens`,
        ),
      };
    }),
  );

program
  .command('token:revoke')
  .description('revoke a personal access token by id')
  .argument('<tokenId>', 'id shown by token:list', positiveInt)
  .action(
    run(async (svc, tokenId: number) => {
      if (!(await svc.revokePersonalToken(tokenId))) fail('not_found', `no token with id ${tokenId}`);
      return { json: { id: tokenId }, text: [`token ${tokenId} revoked`] };
    }),
  );

// ---- dynamic-DNS tokens -----------------------------------------------------------------------

program
  .command('dyndns:token:create <username> <hostnames...>')
  .description("create a user's dynamic-DNS token for host names inside zones the user may write (printed once)")
  .requiredOption('--name <name>', 'label for the token')
  .action(
    runDyndns(async ({ accounts, dyndns }, username: string, hostnames: string[], o: { name: string }) => {
      const user = await requireUser(accounts, username);
      const { secret, token } = await dyndns.createToken(user, o.name, hostnames.flatMap((h) => h.split(',')).filter(Boolean));
      return {
        json: { secret, id: token.id, name: token.name, hostnames: token.hostnames },
        text: [`created dynamic-DNS token ${token.id} for ${user.username}: ${token.hostnames.join(', ')}`, ...shownOnce('token', secret)],
      };
    }),
  );

program
  .command('dyndns:token:list <username>')
  .description("list a user's dynamic-DNS tokens")
  .action(
    runDyndns(async ({ accounts, dyndns }, username: string) => {
      const user = await requireUser(accounts, username);
      const tokens = await dyndns.listTokens(user);
      return {
        json: {
          username: user.username,
          tokens: tokens.map((t) => ({ id: t.id, name: t.name, prefix: t.prefix, hostnames: t.hostnames, last_used_at: t.lastUsedAt })),
        },
        text: table(
          ['ID', 'NAME', 'PREFIX', 'HOSTNAMES', 'LAST USED'],
          tokens.map((t) => [String(t.id), t.name, t.prefix, t.hostnames.join(','), day(t.lastUsedAt?.toISOString() ?? null)]),
          `${user.username} has no dynamic-DNS tokens`,
        ),
      };
    }),
  );

program
  .command('dyndns:token:revoke <username>')
  .description("revoke one of a user's dynamic-DNS tokens by id")
  .argument('<tokenId>', 'id shown by dyndns:token:list', positiveInt)
  .action(
    runDyndns(async ({ accounts, dyndns }, username: string, tokenId: number) => {
      await dyndns.revokeToken(await requireUser(accounts, username), tokenId);
      return { json: { id: tokenId }, text: [`dynamic-DNS token ${tokenId} revoked`] };
    }),
  );

// ---- DNS API keys -----------------------------------------------------------------------------

program
  .command('dnskey:create')
  .description('create a DNS API key (global unless --user; printed once)')
  .requiredOption('--name <name>', 'label for the key')
  .option('--user <username>', 'the key acts as this user instead of globally')
  .option('--expires-days <days>', 'expire after this many days (default: never)', positiveInt)
  .action(
    run(async (svc, o: { name: string; user?: string; expiresDays?: number }) => {
      const created = await svc.createDnsApiKey({ name: o.name, username: o.user, expiresInDays: o.expiresDays });
      return {
        json: { secret: created.key, key: { id: created.id, name: o.name, global: created.global, user: o.user ?? null } },
        text: [`created ${created.global ? 'global ' : ''}DNS API key ${created.id}${o.user ? ` for ${o.user}` : ''}`, ...shownOnce('key', created.key)],
      };
    }),
  );

program
  .command('dnskey:list')
  .description('list DNS API keys')
  .action(
    run(async (svc) => {
      const keys = (await svc.listDnsApiKeys()).map(presentKey);
      return {
        json: { keys },
        text: table(
          ['ID', 'NAME', 'PREFIX', 'USER', 'EXPIRES', 'LAST USED', 'REVOKED'],
          keys.map((k) => [String(k.id), k.name, k.prefix, k.user ?? '(global)', day(k.expires_at), day(k.last_used_at), day(k.revoked_at)]),
          'no DNS API keys',
        ),
      };
    }),
  );

program
  .command('dnskey:revoke')
  .description('revoke a DNS API key by id')
  .argument('<keyId>', 'id shown by dnskey:list', positiveInt)
  .action(
    run(async (svc, keyId: number) => {
      if (!(await svc.revokeDnsApiKey(keyId))) fail('not_found', `no DNS API key with id ${keyId}`);
      return { json: { id: keyId }, text: [`DNS API key ${keyId} revoked`] };
    }),
  );

// ---- DNS IP whitelist -------------------------------------------------------------------------

program
  .command('whitelist:add <cidr>')
  .description('allow an address or CIDR range to use the DNS API without credentials')
  .option('--note <text>', 'why this range is allowed')
  .action(
    run(async (svc, cidr: string, o: { note?: string }) => {
      const entry = await svc.addWhitelist(cidr, o.note);
      return { json: { entry: presentEntry(entry) }, text: [`whitelisted ${entry.cidr}${entry.note ? ` (${entry.note})` : ''}`] };
    }),
  );

program
  .command('whitelist:remove <cidr>')
  .description('remove an address or CIDR range from the DNS whitelist')
  .action(
    run(async (svc, cidr: string) => {
      if (!(await svc.removeWhitelist(cidr))) fail('not_found', `${cidr} is not whitelisted`);
      return { json: { cidr }, text: [`removed ${cidr}`] };
    }),
  );

program
  .command('whitelist:list')
  .description('list the DNS IP whitelist')
  .action(
    run(async (svc) => {
      const entries = (await svc.listWhitelist()).map(presentEntry);
      return {
        json: { entries },
        text: table(
          ['ID', 'CIDR', 'NOTE'],
          entries.map((e) => [String(e.id), e.cidr, e.note ?? '-']),
          'the whitelist is empty',
        ),
      };
    }),
  );

// ---- worker agents ----------------------------------------------------------------------------

program
  .command('worker:create <name>')
  .description('register a worker agent and print its secret once (give it to the agent as WORKER_SECRET)')
  .action(
    runWorkers(async (workers, name: string) => {
      const { id, secret } = await workers.createWorker(name);
      return { json: { worker: { id, name }, secret }, text: [`created worker ${name} (id ${id})`, ...shownOnce('secret', secret)] };
    }),
  );

program
  .command('worker:rotate <name>')
  .description('issue a new secret for a worker (the old one stops working) and re-enable it if revoked')
  .action(
    runWorkers(async (workers, name: string) => {
      const secret = await workers.rotateSecret(name);
      return { json: { worker: { name }, secret }, text: [`new secret for ${name}`, ...shownOnce('secret', secret)] };
    }),
  );

program
  .command('worker:revoke <name>')
  .description('revoke a worker agent; its calls are refused from now on')
  .action(
    runWorkers(async (workers, name: string) => {
      if (!(await workers.revokeWorker(name))) fail('not_found', `no worker named "${name}"`);
      return { json: { worker: { name } }, text: [`worker ${name} revoked`] };
    }),
  );

program
  .command('worker:list')
  .description('list worker agents with their last contact and advertised capabilities')
  .action(
    runWorkers(async (workers) => {
      const list = (await workers.listWorkers()).map((w) => ({
        id: w.id,
        name: w.name,
        revoked: w.revoked,
        last_seen_at: iso(w.lastSeenAt),
        contract_version: w.contractVersion,
        agent_version: w.agentVersion,
        hostname: w.hostname,
        capabilities: w.capabilities,
      }));
      return {
        json: { workers: list },
        text: table(
          ['ID', 'NAME', 'STATE', 'LAST SEEN', 'HOST', 'MODELS', 'ENGINES', 'DIARIZATION'],
          list.map((w) => [
            String(w.id),
            w.name,
            w.revoked ? 'revoked' : 'active',
            w.last_seen_at?.replace('T', ' ').slice(0, 19) ?? '-',
            w.hostname ?? '-',
            w.capabilities?.models.join(',') || '-',
            w.capabilities?.engines.join(',') || '-',
            // a diarizer that cannot run says why (missing or broken model files)
            w.capabilities?.diarization
              ? (w.capabilities.diarizationEngine ?? 'yes')
              : w.capabilities?.diarizationError
                ? `no: ${w.capabilities.diarizationError}`
                : '-',
          ]),
          'no workers',
        ),
      };
    }),
  );

// ---- chat-log archive ------------------------------------------------------------------------

const runIrc = runWith((orm) => new IrcImportService(orm));

program
  .command('irc:import <paths...>')
  .description(
    'import chat-log files (files or folders, walked recursively) into a network; re-importing adds nothing twice. Exits 2 when files were passed over or lines matched no parser',
  )
  .requiredOption('--network <name>', 'network name (created when missing)')
  .addOption(new Option('--source <source>', 'archive the network belongs to').choices([...IRC_SOURCES]).makeOptionMandatory())
  .option('--format <format>', `log format (${IRC_IMPORT_FORMATS.join(', ')}); auto detects it once per channel from a sample of its files`, 'auto')
  .option('--tz <zone>', 'IANA time zone the log times are in (converted to UTC); lines with their own offset keep it', 'UTC')
  .option('--channel <name>', 'channel (or query nick) of every file, for logs whose paths do not say')
  .option(
    '--path <pattern>',
    "where channel and day are in the paths, e.g. '{channel}/{yyyy}/{mm}/{dd}.log' ({channel} {yyyy} {mm} {dd} {date} {yyyymmdd} {network} *)",
  )
  .option('--date <YYYY-MM-DD>', 'day of the first line of a single time-only log whose path does not say (refused with more than one file)')
  .option('--dry-run', 'parse everything and report what would be stored; write nothing')
  .option('--max-unparsed <n>', 'lines matching no parser tolerated before the import counts as incomplete', '0')
  .option('--allow-unparsed', 'list lines matching no parser but do not fail because of them')
  .action(
    runIrc(
      async (
        irc,
        paths: string[],
        o: {
          network: string;
          source: IrcSource;
          format: string;
          tz: string;
          channel?: string;
          date?: string;
          path?: string;
          dryRun?: boolean;
          maxUnparsed: string;
          allowUnparsed?: boolean;
        },
      ) => {
        if (!/^\d{1,9}$/.test(o.maxUnparsed)) fail('validation_failed', `--max-unparsed: "${o.maxUnparsed}" is not a whole number`);
        const c = await irc.importPaths(paths, {
          network: o.network,
          source: o.source,
          format: o.format,
          timeZone: o.tz,
          ...(o.channel !== undefined ? { channel: o.channel } : {}),
          ...(o.date !== undefined ? { date: o.date } : {}),
          ...(o.path !== undefined ? { pathPattern: o.path } : {}),
          dryRun: o.dryRun === true,
          maxUnparsed: Number(o.maxUnparsed),
          allowUnparsed: o.allowUnparsed === true,
        });
        // Rows that parsed are stored either way; a non-zero exit says the archive is not the whole of the logs.
        if (c.problems.length) process.exitCode = 2;
        return {
          json: { ...c },
          text: [
            `${c.dryRun ? 'dry run (nothing written): ' : ''}files ${c.files}, lines ${c.lines}, ${c.dryRun ? 'would insert' : 'inserted'} ${c.inserted}, skipped ${c.skipped} (unparsed ${c.unparsed})` +
              (c.batchId !== null ? `, batch ${c.batchId}` : ''),
            ...Object.entries(c.formats).map(([f, n]) => `format ${f}: ${n} file(s)`),
            ...c.channels.map(
              (ch) =>
                `channel ${ch.channel}: ${ch.files} file(s) read as ${ch.format ?? '(none)'}; alone detected as ${Object.entries(ch.detected)
                  .map(([f, n]) => `${f} ${n}`)
                  .join(', ')}`,
            ),
            ...c.warnings.map((w) => `warning: ${w}`),
            ...(c.commonTerms?.changed
              ? [`common terms: ${c.commonTerms.changed} term(s) changed place${c.commonTerms.rebuilt ? '; every pair count recounted' : ''}`]
              : []),
            ...c.unparsedFiles.flatMap((f) => [
              `unparsed: ${f.path}: ${f.count} line(s)`,
              ...f.lines.map((l) => `  line ${l.lineNo}: ${l.text}`),
              ...(f.count > f.lines.length ? [`  … ${f.count - f.lines.length} more`] : []),
            ]),
            ...c.ignoredFiles.map((f) => `not imported: ${f.path}: ${f.reason}`),
            ...c.problems.map((p) => `error: ${p}`),
            ...(c.problems.length && c.batchId !== null ? [`(the rows that parsed are stored; undo with irc:import:revert ${c.batchId})`] : []),
          ],
        };
      },
    ),
  );

const runCorrections = runWith(async (orm) => new (await import('./irc/correction-service.js')).IrcCorrectionService(orm));

program
  .command('irc:imports')
  .description('list import batches (newest first) with their counts and the rows each still has')
  .option('--network <name>', 'only this network')
  .addOption(new Option('--source <source>', 'only this archive').choices([...IRC_SOURCES]))
  .action(
    runCorrections(async (svc, o: { network?: string; source?: IrcSource }) => {
      const batches = await svc.listBatches({ ...(o.network ? { network: o.network } : {}), ...(o.source ? { source: o.source } : {}) });
      return {
        json: { batches },
        text: table(
          ['BATCH', 'STARTED (UTC)', 'NETWORK', 'FILES', 'LINES', 'INSERTED', 'ROWS NOW', 'UNPARSED', 'STATE', 'OPTIONS', 'PATHS'],
          batches.map((b) => [
            String(b.id),
            b.started_at,
            `${b.network} (${b.source})`,
            String(b.files),
            String(b.lines),
            String(b.inserted),
            String(b.rows),
            String(b.unparsed),
            b.reverted_at ? `reverted ${b.reverted_at}` : b.finished_at ? 'done' : 'unfinished',
            Object.entries(b.options)
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(' '),
            b.paths.join(' '),
          ]),
          'no import batches',
        ),
      };
    }),
  );

program
  .command('irc:import:revert <batch>')
  .description('remove every row an import batch added (channel counters, nick statistics and nick links follow); then re-import with the right options')
  .option('--dry-run', 'count what would be removed; change nothing')
  .action(
    runCorrections(async (svc, batch: string, o: { dryRun?: boolean }) => {
      if (!/^\d{1,9}$/.test(batch)) fail('validation_failed', `batch: "${batch}" is not a batch number (irc:imports lists them)`);
      const r = await svc.revertBatch(Number(batch), { dryRun: o.dryRun === true });
      return {
        json: { ...r },
        text: [
          `${r.dryRun ? 'dry run: would remove' : 'removed'} ${r.deleted} row(s) of batch ${r.batch} (${r.network}) in ${r.channels} channel(s); ${r.nicks} nick(s) recounted, ${r.linksRemoved} nick link(s) removed`,
        ],
      };
    }),
  );

program
  .command('irc:delete')
  .description('delete rows of a network, optionally of one channel and a UTC time range; channel counters, nick statistics and nick links follow')
  .requiredOption('--network <name>', 'network name')
  .addOption(new Option('--source <source>', 'archive the network belongs to').choices([...IRC_SOURCES]).default('production'))
  .option('--channel <name>', 'only this channel')
  .option('--from <when>', 'UTC, inclusive: YYYY-MM-DD or "YYYY-MM-DD HH:MM:SS"')
  .option('--to <when>', 'UTC, inclusive: YYYY-MM-DD (the whole day) or "YYYY-MM-DD HH:MM:SS"')
  .option('--dry-run', 'count what would be deleted; change nothing')
  .action(
    runCorrections(async (svc, o: { network: string; source: IrcSource; channel?: string; from?: string; to?: string; dryRun?: boolean }) => {
      const r = await svc.deleteRows({
        network: o.network,
        source: o.source,
        ...(o.channel !== undefined ? { channel: o.channel } : {}),
        ...(o.from !== undefined ? { from: o.from } : {}),
        ...(o.to !== undefined ? { to: o.to } : {}),
        dryRun: o.dryRun === true,
      });
      return {
        json: { ...r },
        text: [
          `${r.dryRun ? 'dry run: would delete' : 'deleted'} ${r.deleted} row(s) in ${r.channels} channel(s); ${r.nicks} nick(s) recounted, ${r.linksRemoved} nick link(s) removed`,
        ],
      };
    }),
  );

program
  .command('irc:common-terms')
  .description(
    "choose the archive's most frequent words again; pair counts of its common words with its frequent words let a search for a word less a common word be counted without reading rows (imports and the maintenance queue also do this)",
  )
  .option('--list', 'only list the current common and frequent terms')
  .action(
    runWith(async (orm) => new (await import('./irc/common-terms.js')).IrcCommonTerms(orm))(async (svc, o: { list?: boolean }) => {
      if (o.list) {
        const l = await svc.list();
        return {
          json: { ...l },
          text: l.frequent.length
            ? [`common (${l.common.length}): ${l.common.join(' ')}`, `frequent (${l.frequent.length}): ${l.frequent.join(' ')}`]
            : ['no common terms (an empty archive, or none chosen yet)'],
        };
      }
      const r = await svc.refresh();
      return {
        json: { ...r },
        text: [
          `${r.common.length} common term(s): ${r.common.join(' ') || '(none)'}; ${r.frequent} frequent term(s)`,
          `${r.changed} term(s) changed place${r.rebuilt ? '; every pair count recounted in one pass' : ''}`,
        ],
      };
    }),
  );

const runAliases = runWith(async (orm) => new (await import('./irc/alias-service.js')).IrcAliasService(orm));
const aliasSource = () => new Option('--source <source>', 'archive the network belongs to').choices([...IRC_SOURCES]).default('production');

program
  .command('irc:alias:add <nick> <alias>')
  .description('link two nicks as one person: the nick filter and nick profiles then cover both (undoes an earlier removal)')
  .requiredOption('--network <name>', 'network name')
  .addOption(aliasSource())
  .action(
    runAliases(async (svc, nick: string, alias: string, o: { network: string; source: IrcSource }) => {
      await svc.add(o.source, o.network, nick, alias);
      return { json: { network: o.network, nick, alias }, text: [`linked ${nick} and ${alias} on ${o.network} (${o.source})`] };
    }),
  );

program
  .command('irc:alias:remove <nick> <alias>')
  .description('unlink two nicks, also a link learnt from a nick change; re-importing logs does not bring it back')
  .requiredOption('--network <name>', 'network name')
  .addOption(aliasSource())
  .action(
    runAliases(async (svc, nick: string, alias: string, o: { network: string; source: IrcSource }) => {
      const removed = await svc.remove(o.source, o.network, nick, alias);
      return {
        json: { network: o.network, nick, alias, removed },
        text: [removed ? `unlinked ${nick} and ${alias}` : `${nick} and ${alias} were not linked; the pair is now blocked from linking`],
      };
    }),
  );

program
  .command('irc:alias:list [nick]')
  .description('nick links of a network (learnt from nick changes or made by admins), optionally only those of one nick')
  .requiredOption('--network <name>', 'network name')
  .addOption(aliasSource())
  .action(
    runAliases(async (svc, nick: string | undefined, o: { network: string; source: IrcSource }) => {
      const links = await svc.list(o.source, o.network, nick);
      return {
        json: { links },
        text: table(
          ['NICK', 'ALIAS', 'ORIGIN', 'STATE'],
          links.map((l) => [l.nick, l.alias, l.origin, l.blocked ? 'removed' : 'linked']),
          'no links',
        ),
      };
    }),
  );

program
  .command('irc:logger')
  .description('run the live IRC logger (networks and channels from a JSON file; README "Live logger") until SIGINT/SIGTERM')
  .addOption(new Option('--config <file>', 'logger configuration file (JSON)').env('IRC_LOGGER_CONFIG').makeOptionMandatory())
  .action(async (o: { config: string }) => {
    const [{ IrcLiveLogger, loadIrcLoggerConfig }, { IrcEventStore }, { default: pino }] = await Promise.all([
      import('./irc/live-logger.js'),
      import('./irc/event-store.js'),
      import('pino'),
    ]);
    let config: IrcLoggerConfig;
    try {
      config = loadIrcLoggerConfig(o.config);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      console.error(err.message);
      process.exitCode = EX_CONFIG;
      return;
    }
    await runWith((orm) => orm)(async (orm) => {
      const level = envSchema.shape.LOG_LEVEL.safeParse(process.env.LOG_LEVEL || undefined);
      // Logs go to stderr; stdout carries only the summary printed at the end.
      const logger = pino({ level: level.success ? level.data : 'info' }, pino.destination(2));
      const irc = new IrcLiveLogger({ config, store: new IrcEventStore(orm), logger });
      let onSignal: (s: NodeJS.Signals) => void = () => undefined;
      const signalled = new Promise<NodeJS.Signals>((resolve) => {
        onSignal = resolve;
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
      });
      try {
        await irc.start();
        logger.info({ networks: config.networks.map((n) => n.name) }, 'irc logger running; SIGINT or SIGTERM stops it');
        logger.info({ signal: await signalled }, 'irc logger stopping');
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        await irc.stop();
      }
      const networks = irc
        .status()
        .map((s) => ({ network: s.network, source: s.source, written: s.written, dropped: s.dropped, registrations: s.registrations }));
      return {
        json: { networks },
        text: networks.map((n) => `${n.network} (${n.source}): ${n.written} row(s) written${n.dropped ? `, ${n.dropped} dropped` : ''}`),
      };
    })();
  });

// ---- organization assistant connector ------------------------------------------------------------

const runAssistant = runWith(async (orm) => {
  const { AssistantService } = await import('./assistant/assistant-service.js');
  const env = envSchema
    .pick({
      ASSISTANT_SECRET_KEY: true,
      ASSISTANT_EXTRA_CA_FILE: true,
      ASSISTANT_UPSTREAM_TIMEOUT_SECONDS: true,
      ASSISTANT_RATE_LIMIT_PER_MINUTE: true,
      PORT: true,
      PUBLIC_BASE_URL: true,
    })
    .parse(Object.fromEntries(Object.entries(process.env).filter(([k, v]) => /^(ASSISTANT_|PORT$|PUBLIC_BASE_URL$)/.test(k) && v)));
  const config = { ...env, PUBLIC_BASE_URL: (env.PUBLIC_BASE_URL ?? `http://localhost:${env.PORT}`).replace(/\/+$/, ''), REDIS_KEY_PREFIX: '' };
  return new AssistantService({ orm, redis: null, config, log: { warn: () => undefined } });
});
/** The admin CLI acts as an administrator (recorded as "cli" in the audit log). */
const cliAdmin: AuthUser = { id: 0, username: 'cli', email: null, isAdmin: true, permissions: [] };

program
  .command('assistant:setup:save <slug>')
  .description('create or update an assistant tenant setup (the client secret comes from ASSISTANT_CLIENT_SECRET or --secret-file; needs ASSISTANT_SECRET_KEY)')
  .requiredOption('--client-id <guid>', 'application (client) id of the app registration')
  .option('--name <text>', 'display name (default: the slug)')
  .addOption(new Option('--client-secret <secret>', 'client secret (prefer the environment variable)').env('ASSISTANT_CLIENT_SECRET'))
  .option('--secret-file <file>', 'file holding the client secret')
  .option('--redirect-uri <url>', 'redirect URI (default PUBLIC_BASE_URL/admin/assistant/callback)')
  .option('--graph-url <url>', 'graph API base URL', 'https://graph.microsoft.com')
  .option('--authority-host <url>', 'identity provider host', 'https://login.microsoftonline.com')
  .option('--scopes <scopes...>', 'delegated scopes (default: the required list)')
  .option('--time-zone <iana>', 'time zone sent to the assistant', 'UTC')
  .action(
    runAssistant(
      async (
        svc,
        slug: string,
        o: {
          clientId: string;
          name?: string;
          clientSecret?: string;
          secretFile?: string;
          redirectUri?: string;
          graphUrl: string;
          authorityHost: string;
          scopes?: string[];
          timeZone: string;
        },
      ) => {
        const { DEFAULT_SCOPES } = await import('./assistant/validation.js');
        const existing = (await svc.repo.setupBySlug(slug)) !== null;
        const secret = o.secretFile ? readFileSync(o.secretFile, 'utf8').trim() : o.clientSecret;
        const saved = await svc.saveSetup(
          {
            slug,
            display_name: o.name ?? slug,
            client_id: o.clientId,
            credential_kind: 'secret',
            client_secret: secret,
            redirect_uri: o.redirectUri ?? svc.defaultRedirectUri,
            graph_url: o.graphUrl,
            authority_host: o.authorityHost,
            scopes: o.scopes ?? [...DEFAULT_SCOPES],
            time_zone: o.timeZone,
          },
          cliAdmin,
          existing ? slug : undefined,
        );
        return { json: { setup: saved }, text: [`setup ${saved.slug} ${existing ? 'updated' : 'created'} (secret stored encrypted)`] };
      },
    ),
  );

program
  .command('assistant:setup:list')
  .description('list assistant tenant setups and their delegates (credentials are never shown)')
  .action(
    runAssistant(async (svc) => {
      const setups = await svc.setupsFor(cliAdmin);
      return {
        json: { setups },
        text: table(
          ['SLUG', 'CLIENT ID', 'AUTHORITY', 'GRAPH', 'DELEGATES'],
          setups.map((s) => [s.slug, s.client_id, s.authority_host, s.graph_url, s.delegates.map((d) => d.username).join(',')]),
          'no setups',
        ),
      };
    }),
  );

program
  .command('assistant:delegate <slug> <username>')
  .description('delegate an assistant setup to a user (--remove takes it back)')
  .option('--remove', 'remove the delegation')
  .action(
    runAssistant(async (svc, slug: string, username: string, o: { remove?: boolean }) => {
      await svc.delegate(slug, username, cliAdmin, o.remove === true);
      return { json: { slug, username, delegated: !o.remove }, text: [`${slug} ${o.remove ? 'no longer delegated to' : 'delegated to'} ${username}`] };
    }),
  );

program
  .command('assistant:audit')
  .description('read the assistant audit log, newest first (never holds tokens, codes, state or secrets)')
  .option('--limit <n>', 'rows', positiveInt, 50)
  .option('--action <action>', 'only this action (connect, refresh, validation, request, prompt_test…)')
  .option('--user <username>', 'only this user')
  .action(
    runAssistant(async (svc, o: { limit: number; action?: string; user?: string }) => {
      const user = o.user ? await svc.repo.userByName(o.user) : undefined;
      if (o.user && !user) fail('not_found', `no user named "${o.user}"`);
      const entries = await svc.audit.list({ limit: o.limit, action: o.action, userId: user?.id });
      return {
        json: { entries },
        text: table(
          ['ID', 'AT', 'ACTION', 'RESULT', 'USER', 'SETUP', 'TENANT', 'CODE', 'REQUEST'],
          entries.map((e) => [
            String(e.id),
            e.at,
            e.action,
            e.result,
            e.username ?? '',
            e.setup_slug ?? '',
            e.tenant_id ?? '',
            e.error_code ?? '',
            e.request_id ?? '',
          ]),
          'no entries',
        ),
      };
    }),
  );

await program.parseAsync();
