import type { DnsApiKey, DnsIpWhitelistEntry } from '../accounts/entities.js';
import { envSchema } from '../config.js';
import { dnsEnv } from './dns.js';
import { fail } from './errors.js';
import { day, iso, positiveInt, shownOnce, table } from './format.js';
import { program } from './program.js';
import { runAccounts, runWith } from './runner.js';
import { requireUser } from './users.js';

const runDyndns = runWith(async (orm) => {
  const [{ AccountService }, { DnsService }, { DyndnsService }, { DyndnsTokens }] = await Promise.all([
    import('../accounts/account-service.js'),
    import('../dns/dns-service.js'),
    import('../platform/dyndns/dyndns-service.js'),
    import('../platform/dyndns/dyndns-token-repository.js'),
  ]);
  const accounts = new AccountService(orm);
  const dyndnsEnv = envSchema
    .pick({ DYNDNS_TTL: true, DYNDNS_NOCHG_LIMIT: true, DYNDNS_NOCHG_WINDOW_SECONDS: true, DYNDNS_ABUSE_BLOCK_SECONDS: true })
    .parse(Object.fromEntries(Object.entries(process.env).filter(([k, v]) => k.startsWith('DYNDNS_') && v)));
  const dyndns = new DyndnsService(new DyndnsTokens(orm), new DnsService(orm, dnsEnv()), accounts, dyndnsEnv);
  return { accounts, dyndns };
});
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

/** `dyndns:token:*`: dynamic-DNS tokens. */
export function registerDyndnsCommands(): void {
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
}

/** `dnskey:*`: DNS API keys. */
export function registerDnsKeyCommands(): void {
  program
    .command('dnskey:create')
    .description('create a DNS API key (global unless --user; printed once)')
    .requiredOption('--name <name>', 'label for the key')
    .option('--user <username>', 'the key acts as this user instead of globally')
    .option('--expires-days <days>', 'expire after this many days (default: never)', positiveInt)
    .action(
      runAccounts(async (svc, o: { name: string; user?: string; expiresDays?: number }) => {
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
      runAccounts(async (svc) => {
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
      runAccounts(async (svc, keyId: number) => {
        if (!(await svc.revokeDnsApiKey(keyId))) fail('not_found', `no DNS API key with id ${keyId}`);
        return { json: { id: keyId }, text: [`DNS API key ${keyId} revoked`] };
      }),
    );
}

/** `whitelist:*`: addresses that may use the DNS API without credentials. */
export function registerWhitelistCommands(): void {
  program
    .command('whitelist:add <cidr>')
    .description('allow an address or CIDR range to use the DNS API without credentials')
    .option('--note <text>', 'why this range is allowed')
    .action(
      runAccounts(async (svc, cidr: string, o: { note?: string }) => {
        const entry = await svc.addWhitelist(cidr, o.note);
        return { json: { entry: presentEntry(entry) }, text: [`whitelisted ${entry.cidr}${entry.note ? ` (${entry.note})` : ''}`] };
      }),
    );

  program
    .command('whitelist:remove <cidr>')
    .description('remove an address or CIDR range from the DNS whitelist')
    .action(
      runAccounts(async (svc, cidr: string) => {
        if (!(await svc.removeWhitelist(cidr))) fail('not_found', `${cidr} is not whitelisted`);
        return { json: { cidr }, text: [`removed ${cidr}`] };
      }),
    );

  program
    .command('whitelist:list')
    .description('list the DNS IP whitelist')
    .action(
      runAccounts(async (svc) => {
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
}
