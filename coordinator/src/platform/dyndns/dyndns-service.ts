import { isIPv4, isIPv6 } from 'node:net';
import type { AccountService } from '../../accounts/account-service.js';
import type { AuthUser } from '../../accounts/types.js';
import type { Config } from '../../config.js';
import type { DnsService } from '../../dns/dns-service.js';
import { normalizeName } from '../../dns/wire/index.js';
import type { ZoneRow } from '../../dns/zone-registry.js';
import { AppError, notFound, validationFailed } from '../../http/errors.js';
import type { DyndnsHost, DyndnsToken, DyndnsTokens } from './dyndns-token-repository.js';

type DyndnsConfig = Pick<Config, 'DYNDNS_TTL' | 'DYNDNS_NOCHG_LIMIT' | 'DYNDNS_NOCHG_WINDOW_SECONDS' | 'DYNDNS_ABUSE_BLOCK_SECONDS'>;

/** Most host names one update request may name (dyndns2 answers `numhost` beyond). */
export const MAX_HOSTS_PER_UPDATE = 20;
/** Most host names one token may hold. */
export const MAX_HOSTS_PER_TOKEN = 50;

export interface Addresses {
  v4?: string | undefined;
  v6?: string | undefined;
}

/** An IPv6 address in its canonical (compressed, lower-case) text form. */
export function canonicalIpv6(ip: string): string {
  return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
}

/** `::ffff:192.0.2.1` (an IPv4 client on a dual-stack socket) → `192.0.2.1`. */
function unmapped(ip: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return m ? m[1]! : ip;
}

/**
 * The addresses of one update: `myip` holds up to one IPv4 and one IPv6 address, comma-separated;
 * `myipv6` (as No-IP and some routers send) an IPv6 address. Neither given (or both empty, as
 * ddclient sends `myip=` when it has no address): the client's address. Field errors otherwise.
 */
export function parseAddresses(myip: string | undefined, myipv6: string | undefined, clientIp: string): Addresses {
  const out: Addresses = {};
  const errors: Record<string, string[]> = {};
  const items = (myip ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) {
    if (isIPv4(item)) {
      if (out.v4 === undefined) out.v4 = item;
      else (errors.myip ??= []).push(`holds two IPv4 addresses ("${out.v4}" and "${item}"); give at most one IPv4 and one IPv6 address, comma-separated`);
    } else if (isIPv6(item)) {
      if (out.v6 === undefined) out.v6 = canonicalIpv6(item);
      else (errors.myip ??= []).push(`holds two IPv6 addresses ("${out.v6}" and "${item}"); give at most one IPv4 and one IPv6 address, comma-separated`);
    } else (errors.myip ??= []).push(`"${item}" is not an IPv4 or IPv6 address (at most one of each, comma-separated)`);
  }
  const v6 = myipv6?.trim();
  if (v6) {
    if (!isIPv6(v6)) (errors.myipv6 ??= []).push(`"${v6}" is not an IPv6 address`);
    else if (out.v6 !== undefined && out.v6 !== canonicalIpv6(v6)) (errors.myipv6 ??= []).push('differs from the IPv6 address in myip');
    else out.v6 = canonicalIpv6(v6);
  }
  if (Object.keys(errors).length) throw validationFailed(errors);
  if (out.v4 === undefined && out.v6 === undefined) {
    const ip = unmapped(clientIp);
    if (isIPv4(ip)) out.v4 = ip;
    else if (isIPv6(ip)) out.v6 = canonicalIpv6(ip);
    else throw validationFailed({ myip: ['is required: the client address is not an IP address'] });
  }
  return out;
}

/** A fully qualified host name (two or more LDH labels; no wildcard, no trailing label of digits). */
export function isFqdn(name: string): boolean {
  if (name.length > 253) return false;
  const labels = name.split('.');
  if (labels.length < 2) return false;
  if (!labels.every((l) => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(l))) return false;
  return !/^\d+$/.test(labels[labels.length - 1]!);
}

/**
 * Dynamic DNS (dyndns2, as ddclient, inadyn and routers speak it) onto the zones of the DNS editor:
 * every change is the DNS service's RRset replacement (signed UPDATE with prerequisites, read back,
 * zone cache synchronised). Abuse rule: an update that changes nothing is `nochg`; when it comes
 * within DYNDNS_NOCHG_WINDOW_SECONDS of the host's previous update, it extends a streak, and past
 * DYNDNS_NOCHG_LIMIT such updates in a row the host answers `abuse` for DYNDNS_ABUSE_BLOCK_SECONDS.
 */
export class DyndnsService {
  constructor(
    private readonly tokens: DyndnsTokens,
    private readonly dns: DnsService,
    private readonly accounts: AccountService,
    private readonly config: DyndnsConfig,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Zones the user may write (null: every zone, for administrators). */
  private async writableZones(user: AuthUser): Promise<Set<string> | null> {
    if (user.isAdmin) return null;
    const rights = await this.accounts.zoneRights(user.id);
    return new Set(rights.filter((r) => r.canWrite).map((r) => normalizeName(r.zone)));
  }

  async createToken(user: AuthUser, name: string, hostnames: string[]): Promise<{ secret: string; token: DyndnsToken }> {
    const writable = await this.writableZones(user);
    const errors: Record<string, string[]> = {};
    const hosts: Array<{ hostname: string; zone: string }> = [];
    const seen = new Set<string>();
    const zones = await this.dns.zones.zonesFor(hostnames);
    hostnames.forEach((raw, i) => {
      const h = normalizeName(raw);
      const z = zones[i];
      const fail = (m: string) => (errors[`hostnames.${i}`] = [m]);
      if (!isFqdn(h)) fail(`"${raw}" is not a fully qualified host name`);
      else if (seen.has(h)) fail(`"${h}" is listed twice`);
      else if (!z) fail(`${h} is in no zone managed here`);
      else if (writable !== null && !writable.has(z.zone)) fail(`you may not change zone ${z.zone}`);
      else if (h === z.zone) fail(`${h} is the zone apex; dynamic DNS updates names inside a zone`);
      else hosts.push({ hostname: h, zone: z.zone });
      seen.add(h);
    });
    if (Object.keys(errors).length) throw validationFailed(errors);
    return this.tokens.create(user.id, name.trim(), hosts);
  }

  listTokens(user: AuthUser) {
    return this.tokens.list(user.id);
  }

  async revokeToken(user: AuthUser, id: number) {
    if (!(await this.tokens.revoke(user.id, id))) throw notFound('Dynamic-DNS token not found.');
  }

  /** One dyndns2 answer line per host name, in the order given. */
  async update(user: AuthUser, tokenId: number, hostnameParam: string | undefined, ips: Addresses): Promise<string[]> {
    const names = (hostnameParam ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (names.length === 0) return ['notfqdn'];
    if (names.length > MAX_HOSTS_PER_UPDATE) return ['numhost'];
    const [hosts, writable] = await Promise.all([this.tokens.hosts(tokenId), this.writableZones(user)]);
    const lines: string[] = [];
    for (const raw of names) lines.push(await this.updateOne(tokenId, normalizeName(raw), hosts, writable, ips));
    return lines;
  }

  private async updateOne(tokenId: number, name: string, hosts: Map<string, DyndnsHost>, writable: Set<string> | null, ips: Addresses): Promise<string> {
    if (!isFqdn(name)) return 'notfqdn';
    const host = hosts.get(name);
    // The owner may have lost write access to the zone since the token was made.
    if (!host || (writable !== null && !writable.has(host.zone))) return 'nohost';
    const now = this.now();
    if (host.blockedUntil && host.blockedUntil > now) return 'abuse';
    const answerIp = [ips.v4, ips.v6].filter(Boolean).join(',');
    let zone: ZoneRow;
    let current: { A: string[]; AAAA: string[] };
    try {
      zone = await this.dns.zone(host.zone);
      const client = await this.dns.cache.client(zone);
      const [a, aaaa] = await client.queryMany([
        { name, type: 'A' },
        { name, type: 'AAAA' },
      ]);
      current = {
        A: a!.answers.filter((r) => r.name === name && r.type === 'A').map((r) => r.rdata),
        AAAA: aaaa!.answers.filter((r) => r.name === name && r.type === 'AAAA').map((r) => canonicalIpv6(r.rdata)),
      };
    } catch {
      return '911';
    }
    const changes: Array<{ type: 'A' | 'AAAA'; ip: string }> = [];
    if (ips.v4 !== undefined && !(current.A.length === 1 && current.A[0] === ips.v4)) changes.push({ type: 'A', ip: ips.v4 });
    if (ips.v6 !== undefined && !(current.AAAA.length === 1 && current.AAAA[0] === ips.v6)) changes.push({ type: 'AAAA', ip: ips.v6 });

    if (changes.length === 0) {
      const quick = host.lastUpdateAt !== null && now.getTime() - host.lastUpdateAt.getTime() <= this.config.DYNDNS_NOCHG_WINDOW_SECONDS * 1000;
      const streak = quick ? host.nochgStreak + 1 : 1;
      const blocked = streak > this.config.DYNDNS_NOCHG_LIMIT;
      const next: DyndnsHost = {
        ...host,
        lastUpdateAt: now,
        nochgStreak: blocked ? 0 : streak,
        blockedUntil: blocked ? new Date(now.getTime() + this.config.DYNDNS_ABUSE_BLOCK_SECONDS * 1000) : null,
      };
      await this.tokens.saveHost(tokenId, next);
      hosts.set(name, next);
      return blocked ? 'abuse' : `nochg ${answerIp}`;
    }
    for (const c of changes) {
      try {
        await this.dns.update({ domain: name, type: c.type, new_target: c.ip, ttl: this.config.DYNDNS_TTL, zone });
      } catch (err) {
        // The master refused the data (a CNAME at the name, a concurrent change): the caller's DNS data is in the way.
        if (err instanceof AppError && ['cname_conflict', 'conflict', 'validation_failed'].includes(err.reason)) return 'dnserr';
        return '911';
      }
    }
    const next: DyndnsHost = {
      ...host,
      lastIpv4: ips.v4 ?? host.lastIpv4,
      lastIpv6: ips.v6 ?? host.lastIpv6,
      lastUpdateAt: now,
      nochgStreak: 0,
      blockedUntil: null,
    };
    await this.tokens.saveHost(tokenId, next);
    hosts.set(name, next);
    return `good ${answerIp}`;
  }
}
