import { Resolver } from 'node:dns/promises';
import { isIPv4, isIPv6 } from 'node:net';

/** One configured blocklist: `domain` lists are asked `<domain>.<list>`, `ip` lists `<reversed address>.<list>` (RFC 5782). */
export interface Blocklist {
  zone: string;
  kind: 'domain' | 'ip';
}

export interface BlocklistResult {
  list: string;
  kind: 'domain' | 'ip';
  /** The name that was asked (null when the list does not apply to the target). */
  query: string | null;
  /**
   * `listed`: an A answer in 127.0.0.0/8 (RFC 5782 §2.1); `not_listed`: NXDOMAIN or no A record;
   * `unavailable`: no usable answer in time (timeout, SERVFAIL, REFUSED, an answer outside 127/8 or
   * in 127.255.255.0/24, which lists use to refuse a query) — never counted as clean;
   * `not_applicable`: the list's kind does not fit the target.
   */
  status: 'listed' | 'not_listed' | 'unavailable' | 'not_applicable';
  codes: string[];
  reasons: string[];
  error?: string;
}

/**
 * `REPUTATION_DNSBLS`: comma-separated `zone:kind` entries (`dbl.example.net:domain,
 * zen.example.net:ip`). Throws with a message naming the bad entry.
 */
export function parseBlocklists(value: string): Blocklist[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const m = /^([a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)\.?:(domain|ip)$/i.exec(entry);
      if (!m) throw new Error(`REPUTATION_DNSBLS: "${entry}" is not zone:domain or zone:ip`);
      return { zone: m[1]!.toLowerCase(), kind: m[2]!.toLowerCase() as 'domain' | 'ip' };
    });
}

/** `192.0.2.1` → `1.2.0.192`; `2001:db8::1` → the 32 nibbles reversed, dot-separated (RFC 5782 §2.1, §2.4). */
export function reversedAddress(ip: string): string {
  if (isIPv4(ip)) return ip.split('.').reverse().join('.');
  if (!isIPv6(ip)) throw new Error(`${ip} is not an IP address`);
  const [head = '', tail = ''] = ip.includes('::') ? ip.split('::') : [ip, ''];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  // An embedded IPv4 tail (::ffff:192.0.2.1) is two groups.
  const expand = (groups: string[]) =>
    groups.flatMap((g) => {
      if (!isIPv4(g)) return [g];
      const b = g.split('.').map(Number);
      return [((b[0]! << 8) | b[1]!).toString(16), ((b[2]! << 8) | b[3]!).toString(16)];
    });
  const hh = expand(h);
  const tt = expand(t);
  const groups = ip.includes('::') ? [...hh, ...Array<string>(8 - hh.length - tt.length).fill('0'), ...tt] : hh;
  return groups
    .map((g) => g.padStart(4, '0'))
    .join('')
    .split('')
    .reverse()
    .join('.');
}

const UNAVAILABLE_CODES = new Set(['ETIMEOUT', 'ECONNREFUSED', 'ESERVFAIL', 'EREFUSED', 'ECANCELLED', 'EBADRESP', 'ECONNRESET', 'EFORMERR', 'ENOTIMP']);

/**
 * Asks configured DNS blocklists about a domain or an address through one resolver
 * (`REPUTATION_DNS_RESOLVER`, or the system's), every list at once, each bounded by the timeout.
 */
export class DnsblClient {
  constructor(
    private readonly lists: Blocklist[],
    private readonly resolver: string,
    private readonly timeoutMs: number,
  ) {}

  get configured(): readonly Blocklist[] {
    return this.lists;
  }

  private newResolver(): Resolver {
    const r = new Resolver({ timeout: this.timeoutMs, tries: 1 });
    if (this.resolver) r.setServers([this.resolver]);
    return r;
  }

  /** Every list, for a target that has a domain and/or an address. */
  async check(target: { domain?: string | undefined; ip?: string | undefined }): Promise<BlocklistResult[]> {
    return Promise.all(
      this.lists.map(async (list): Promise<BlocklistResult> => {
        const key = list.kind === 'domain' ? target.domain : target.ip ? reversedAddress(target.ip) : undefined;
        if (!key) return { list: list.zone, kind: list.kind, query: null, status: 'not_applicable', codes: [], reasons: [] };
        return this.ask(list, `${key}.${list.zone}`);
      }),
    );
  }

  private async ask(list: Blocklist, name: string): Promise<BlocklistResult> {
    const base = { list: list.zone, kind: list.kind, query: name };
    const resolver = this.newResolver();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        resolver.cancel();
        reject(Object.assign(new Error('no answer in time'), { code: 'ETIMEOUT' }));
      }, this.timeoutMs + 250);
    });
    try {
      let codes: string[];
      try {
        codes = await Promise.race([resolver.resolve4(name), deadline]);
      } catch (err) {
        const code = (err as { code?: string }).code ?? '';
        if (code === 'ENOTFOUND' || code === 'ENODATA') return { ...base, status: 'not_listed', codes: [], reasons: [] };
        const why = UNAVAILABLE_CODES.has(code) ? code : code || (err as Error).message;
        return { ...base, status: 'unavailable', codes: [], reasons: [], error: `the list did not answer usably (${why})` };
      }
      const odd = codes.filter((c) => !c.startsWith('127.') || c.startsWith('127.255.255.'));
      if (odd.length) {
        return {
          ...base,
          status: 'unavailable',
          codes,
          reasons: [],
          error: `answer ${odd.join(', ')} is not a listing (RFC 5782: 127.0.0.0/8; 127.255.255.x: query refused)`,
        };
      }
      const reasons = await Promise.race([resolver.resolveTxt(name), deadline]).then(
        (txt) => txt.map((parts) => parts.join('')),
        () => [],
      );
      return { ...base, status: 'listed', codes: codes.sort(), reasons };
    } finally {
      clearTimeout(timer);
    }
  }
}
