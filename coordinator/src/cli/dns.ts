import { envSchema } from '../config.js';
import { fail } from './errors.js';
import { nonNegativeInt, positiveInt, table } from './format.js';
import { program } from './program.js';
import { runWith } from './runner.js';

/** The DNS settings from the environment (the rest of the coordinator's configuration is not needed). */
export const dnsEnv = () =>
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
const runDns = runWith(async (orm) => new (await import('../dns/dns-service.js')).DnsService(orm, dnsEnv()));

/** `dns:zone:*`: the zones the DNS API serves. */
export function registerDnsZoneCommands(): void {
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
          const { checkPaths } = await import('../dns/zone-registry.js');
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
}

/** `dns:providers:*` and `dns:acme:*`: provider zones and ACME challenge clean-up. */
export function registerDnsProviderCommands(): void {
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
            .map((l) => ({
              zone: l.zone,
              provider: 'cloudflare',
              provider_zone_id: l.providerZoneId,
              token_ref: l.tokenRef,
              source: `imported (${l.origin})`,
            })),
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
        const { acmeOwner } = await import('../dns/acme.js');
        // A provider zone (mapping, imported config, NS detection) is bound to its provider; a local one needs readable paths.
        const zone = await dns.bind(
          (await dns.zones.zoneFor(acmeOwner(domain))) ?? fail('not_found', `${acmeOwner(domain)} is not inside any registered zone`),
        );
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
}
