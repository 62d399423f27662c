/**
 * Which zones an external provider serves, and how: the `dns_provider_zones` mapping table, the
 * older host-side provider config as an imported fallback, and NS auto-detection. Resolved per
 * zone into a ProviderBinding; the detection and the looked-up zone ids are remembered for
 * DNS_PROVIDER_DETECT_TTL_SECONDS.
 */
import { readFile } from 'node:fs/promises';
import type { Config } from '../../config.js';
import { AppError, validationFailed } from '../../http/errors.js';
import { DnsMasterClient, normalizeName, validateName } from '../wire/index.js';
import { Mappings } from '../zone-repository.js';
import { loadKey, mappingOfRow, type MappingRow, type ZoneRegistry, type ZoneRow } from '../zone-registry.js';
import { CloudflareClient, isCloudflareNameServer, providerFailure } from './cloudflare.js';
import { checkTokenRef, parseEnvFile, publicRef, resolveTokenRef } from './token-ref.js';
import { PROVIDERS, type ProviderBinding } from './types.js';

export type ProviderConfig = Pick<
  Config,
  'DNS_CLOUDFLARE_API_URL' | 'DNS_CLOUDFLARE_TOKEN_REF' | 'DNS_PROVIDER_LEGACY_FILE' | 'DNS_PROVIDER_DETECT_TTL_SECONDS' | 'DNS_TIMEOUT_MS'
>;

/** One zone of the older host-side config. */
export interface LegacyEntry {
  zone: string;
  providerZoneId: string;
  tokenRef: string;
  /** Where it was found (the file, or the environment). */
  origin: string;
}

const TOKEN_KEYS = ['CLOUDFLARE_API_TOKEN', 'CF_API_TOKEN', 'CF_DNS_API_TOKEN'];
const ZONE_ID_KEYS = ['CLOUDFLARE_ZONE_ID', 'CF_ZONE_ID'];
const ZONE_KEYS = ['CLOUDFLARE_ZONE', 'CF_ZONE', 'CLOUDFLARE_ZONE_NAME'];
const first = (m: Map<string, string> | NodeJS.ProcessEnv, keys: string[]) => {
  for (const k of keys) {
    const v = m instanceof Map ? m.get(k) : m[k];
    if (v?.trim()) return { key: k, value: v.trim() };
  }
  return null;
};

export class ProviderDirectory {
  private readonly remembered = new Map<string, { at: number; value: unknown }>();
  private legacyMemo: { at: number; entries: LegacyEntry[] } | null = null;

  constructor(
    private readonly zones: ZoneRegistry,
    private readonly config: ProviderConfig,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  private get ttlMs() {
    return this.config.DNS_PROVIDER_DETECT_TTL_SECONDS * 1000;
  }

  private async remember<T>(key: string, make: () => Promise<T>): Promise<T> {
    const hit = this.remembered.get(key);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.value as T;
    const value = await make();
    this.remembered.set(key, { at: Date.now(), value });
    return value;
  }

  /** Forgets detections and looked-up ids (after a mapping change). */
  forget() {
    this.remembered.clear();
    this.legacyMemo = null;
  }

  // ---- the mapping table ----------------------------------------------------------------------

  async listMappings(zoneId?: number): Promise<MappingRow[]> {
    const rows = zoneId === undefined ? await Mappings.all.rows(this.zones.knex(), {}) : await Mappings.of.rows(this.zones.knex(), { zoneId });
    return rows.map((r) => mappingOfRow(r));
  }

  async mappingOf(zoneId: number): Promise<MappingRow | null> {
    return (await this.listMappings(zoneId))[0] ?? null;
  }

  /**
   * Adds or replaces a mapping row. Without `providerZoneId` the zone is looked up at the provider
   * with the referenced token (so a wrong token or zone name is said now, not at the first read).
   */
  async saveMapping(input: { zone: string; provider?: string; providerZoneId?: string; tokenRef: string }): Promise<MappingRow> {
    const name = validateName(input.zone, 'owner', { field: 'zone' });
    if (!name.ok) throw validationFailed({ zone: [name.errors[0]!.message] });
    const provider = (input.provider ?? 'cloudflare').toLowerCase();
    if (!(provider in PROVIDERS)) throw validationFailed({ provider: [`unknown provider "${provider}" (known: ${Object.keys(PROVIDERS).join(', ')})`] });
    const tokenRef = checkTokenRef(input.tokenRef);
    let id = input.providerZoneId?.trim();
    if (id !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(id)) throw validationFailed({ provider_zone_id: ['must be 1-64 letters, digits, _ or -'] });
    if (!id) {
      const client = await this.clientFor({ tokenRef, zone: name.value });
      const found = await client.findZone(name.value).catch((e: unknown) => {
        throw providerFailure(e, { zone: name.value, tokenRef });
      });
      if (!found) throw validationFailed({ zone: [`the token from ${publicRef(tokenRef)} cannot see a Cloudflare zone named ${name.value}`] });
      id = found.id;
    }
    const z = await this.zones.ensureExternal(name.value);
    await Mappings.save.run(this.zones.knex(), { zoneId: z.id, provider, providerZoneId: id, tokenRef });
    this.forget();
    return (await this.mappingOf(z.id))!;
  }

  /** Drops the mapping; a zone row that only existed for it (no zone file) goes too, with its cache. */
  async removeMapping(zone: string): Promise<boolean> {
    const z = await this.zones.get(zone);
    if (!z) return false;
    if ((await Mappings.remove.run(this.zones.knex(), { zoneId: z.id })) === 0) return false;
    if (z.filePath === null && !(await this.legacy()).some((l) => l.zone === z.zone)) await this.zones.remove(z.zone);
    this.forget();
    return true;
  }

  // ---- older host-side config -----------------------------------------------------------------

  /**
   * The older host-side provider config: DNS_PROVIDER_LEGACY_FILE (`KEY=value` lines with
   * CLOUDFLARE_API_TOKEN or CF_API_TOKEN or CF_DNS_API_TOKEN, CLOUDFLARE_ZONE_ID or CF_ZONE_ID,
   * optionally CLOUDFLARE_ZONE), or the same variables in the coordinator's environment. Without a
   * zone name the zone is looked up by id. Re-read at most every DNS_PROVIDER_DETECT_TTL_SECONDS.
   */
  async legacy(): Promise<LegacyEntry[]> {
    if (this.legacyMemo && Date.now() - this.legacyMemo.at < this.ttlMs) return this.legacyMemo.entries;
    const entries: LegacyEntry[] = [];
    const sources: Array<{ origin: string; vars: Map<string, string> | NodeJS.ProcessEnv; ref: (key: string) => string }> = [];
    const file = this.config.DNS_PROVIDER_LEGACY_FILE;
    if (file) {
      const text = await readFile(file, 'utf8').catch(() => null);
      if (text !== null) sources.push({ origin: file, vars: parseEnvFile(text), ref: (k) => `file:${file}#${k}` });
    }
    sources.push({ origin: 'environment', vars: this.env, ref: (k) => `env:${k}` });
    for (const s of sources) {
      const token = first(s.vars, TOKEN_KEYS);
      const id = first(s.vars, ZONE_ID_KEYS);
      if (!token || !id) continue;
      const tokenRef = s.ref(token.key);
      let zone = first(s.vars, ZONE_KEYS)?.value;
      if (!zone) {
        const found = await this.clientFor({ tokenRef, zone: id.value })
          .then((c) => c.getZone(id.value))
          .catch(() => null);
        zone = found?.name;
      }
      if (zone && !entries.some((e) => e.zone === normalizeName(zone)))
        entries.push({ zone: normalizeName(zone), providerZoneId: id.value, tokenRef, origin: s.origin });
    }
    this.legacyMemo = { at: Date.now(), entries };
    return entries;
  }

  /** Registers the legacy config's zones (rows without zone file) so that they are listed and served. */
  async importLegacy(): Promise<LegacyEntry[]> {
    const entries = await this.legacy();
    for (const e of entries) await this.zones.ensureExternal(e.zone);
    return entries;
  }

  // ---- resolution -----------------------------------------------------------------------------

  /** How `z` is served by a provider, or null when it is a local zone. `mappings`: every mapping row, read once for a list of zones. */
  async binding(z: ZoneRow, mappings?: MappingRow[]): Promise<ProviderBinding | null> {
    const label = PROVIDERS.cloudflare.label;
    const m = mappings ? (mappings.find((x) => x.zoneId === z.id) ?? null) : await this.mappingOf(z.id);
    if (m)
      return this.ready({
        provider: m.provider,
        label: PROVIDERS[m.provider].label,
        source: 'mapping',
        providerZoneId: m.providerZoneId,
        tokenRef: m.tokenRef,
      });
    const l = (await this.legacy()).find((e) => e.zone === z.zone);
    if (l) return this.ready({ provider: 'cloudflare', label, source: 'imported', providerZoneId: l.providerZoneId, tokenRef: l.tokenRef });
    if (z.filePath === null || z.keyPath === null) return null;
    // Detection asks the master for the zone's NS set, and only when a provider token is configured (without one there is no provider path).
    const tokenRef = this.config.DNS_CLOUDFLARE_TOKEN_REF;
    if ('problem' in (await resolveTokenRef(tokenRef, this.env))) return null;
    const detected = await this.remember(`ns:${z.id}`, () => this.nsAreCloudflare(z));
    if (!detected) return null;
    // Found or not found is remembered; a failed lookup (Cloudflare unreachable, 5xx, 429) is asked again next time.
    const found: { id: string } | { problem: string } = await this.remember(`id:${z.zone}`, async () => {
      const zone = await (await this.clientFor({ tokenRef, zone: z.zone })).findZone(z.zone);
      return zone ? { id: zone.id } : { problem: `the token from ${publicRef(tokenRef)} cannot access the Cloudflare zone ${z.zone}` };
    }).catch((err: unknown) => ({ problem: providerFailure(err, { zone: z.zone, tokenRef }).message }));
    const b: Omit<ProviderBinding, 'ready'> = {
      provider: 'cloudflare',
      label,
      source: 'detected',
      providerZoneId: 'id' in found ? found.id : null,
      tokenRef,
    };
    return 'problem' in found ? { ...b, ready: false, problem: found.problem } : this.ready(b);
  }

  private async ready(b: Omit<ProviderBinding, 'ready'>): Promise<ProviderBinding> {
    const t = await resolveTokenRef(b.tokenRef, this.env);
    return 'problem' in t ? { ...b, ready: false, problem: `API token: ${t.problem}` } : { ...b, ready: true };
  }

  /** The zone's NS set at its master is non-empty and every name server is a Cloudflare one. A master that cannot be asked: not detected. */
  private async nsAreCloudflare(z: ZoneRow): Promise<boolean> {
    try {
      const client = new DnsMasterClient({ server: z.server, port: z.port, key: await loadKey(z), timeoutMs: Math.min(2000, this.config.DNS_TIMEOUT_MS) });
      const [ans] = await client.queryMany([{ name: z.zone, type: 'NS' }]);
      const ns = (ans?.answers ?? []).filter((r) => r.type === 'NS' && r.name === z.zone).map((r) => r.rdata);
      return ns.length > 0 && ns.every(isCloudflareNameServer);
    } catch {
      return false;
    }
  }

  /** A client with the binding's token (503 naming the reference when it does not resolve). */
  async clientFor(b: { tokenRef: string; zone: string }): Promise<CloudflareClient> {
    const t = await resolveTokenRef(b.tokenRef, this.env);
    if ('problem' in t)
      throw new AppError(
        'service_unavailable',
        `zone ${b.zone}: the Cloudflare API token cannot be read: ${t.problem} (token reference ${publicRef(b.tokenRef)})`,
      );
    return new CloudflareClient({ baseUrl: this.config.DNS_CLOUDFLARE_API_URL, token: t.token, timeoutMs: this.config.DNS_TIMEOUT_MS });
  }
}
