import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, ProxyAgent, fetch as undiciFetch, type Dispatcher, type RequestInit, type Response } from 'undici';
import { parseCidr } from './cidr.js';

/**
 * The outbound (SSRF) policy for URLs that users give us: source URLs downloaded by the coordinator
 * or by a worker agent, and terminal callbacks. One implementation for both sides, so a worker
 * enforces exactly what the coordinator does, with the allow-list it is configured with.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Range = [Address, number];

function parseRanges(ranges: readonly string[]): Range[] {
  return ranges.map((range) => {
    const parsed = parseCidr(range);
    if (!parsed) throw new Error(`not an address or CIDR range: ${range}`);
    return [ipaddr.parse(parsed[0]), parsed[1]];
  });
}

function inRanges(addr: Address, ranges: readonly Range[]): boolean {
  return ranges.some(([net, prefix]) => net.kind() === addr.kind() && addr.match(net, prefix));
}

/**
 * Addresses a server-side request must never reach unless an administrator allows them: loopback,
 * private, carrier-grade NAT, link-local (cloud metadata lives at 169.254.169.254), unique-local,
 * site-local, multicast, reserved and documentation ranges, the IPv4-compatible block (::/96),
 * local-use NAT64 (64:ff9b:1::/48, its IPv4 part is where the operator puts it) and Teredo (its
 * IPv4 parts are obfuscated). IPv6 forms that carry an IPv4 address in a known place are judged by
 * that address instead (see embeddedIPv4).
 */
const BLOCKED = parseRanges([
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '255.255.255.255/32',
  '::/96',
  '64:ff9b:1::/48',
  '100::/64',
  '2001::/32',
  '2001:db8::/32',
  'fc00::/7',
  'fe80::/10',
  'fec0::/10',
  'ff00::/8',
]);

/**
 * IPv6 ranges whose addresses carry an IPv4 address: the address it really leads to. IPv4-mapped
 * (::ffff:0:0/96) and IPv4-translated (::ffff:0:0:0/96) addresses and the NAT64 well-known prefix
 * (64:ff9b::/96) hold it in the last 32 bits, 6to4 (2002::/16) in the 32 bits after the prefix.
 */
const EMBEDDING: Array<{ range: Range; at: number }> = [
  { range: [ipaddr.parse('::ffff:0:0'), 96], at: 6 },
  { range: [ipaddr.parse('::ffff:0:0:0'), 96], at: 6 },
  { range: [ipaddr.parse('64:ff9b::'), 96], at: 6 },
  { range: [ipaddr.parse('2002::'), 16], at: 1 },
];

function embeddedIPv4(addr: ipaddr.IPv6): ipaddr.IPv4 | null {
  const hit = EMBEDDING.find(({ range }) => inRanges(addr, [range]));
  if (!hit) return null;
  const high = addr.parts[hit.at]!;
  const low = addr.parts[hit.at + 1]!;
  return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
}

/** Host names that are local by definition (a trailing dot is the same name). */
const LOCAL_NAME = /^(localhost|.*\.localhost|.*\.local|.*\.internal)$/i;

export class OutboundRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutboundRefused';
  }
}

/**
 * Server-side request forgery guard for URLs that users give us (callback_url, source_url).
 * Checked three times: the URL's shape when it is submitted, every address its host name resolves
 * to, and the address actually connected to (the DNS answer is checked inside the connection's own
 * lookup, so a second, different answer cannot slip through), on every redirect hop.
 */
export class OutboundPolicy {
  private readonly allowed: Range[];
  private readonly agent: Agent;
  private readonly proxies = new Map<string, ProxyAgent>();

  /** `allowRanges`: addresses and CIDR ranges that may be reached although blocked; throws on a malformed one. */
  constructor(allowRanges: readonly string[] = []) {
    this.allowed = parseRanges(allowRanges);
    this.agent = new Agent({
      connect: {
        lookup: (hostname, options, callback) => {
          dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
            if (err) {
              callback(err, '', 0);
              return;
            }
            const bad = addresses.find((a) => this.isBlocked(a.address));
            if (bad) {
              callback(new OutboundRefused(`${hostname} resolves to a blocked address (${bad.address})`), '', 0);
              return;
            }
            const first = addresses[0];
            if (!first) {
              callback(new Error(`${hostname} has no address`), '', 0);
              return;
            }
            // undici asks for one address unless `all` was requested.
            if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
            else callback(null, first.address, first.family);
          });
        },
      },
    });
  }

  /** Whether a request may not go to this address (anything that is not an address is blocked). */
  isBlocked(ip: string): boolean {
    if (!ipaddr.isValid(ip)) return true;
    return this.blocked(ipaddr.parse(ip));
  }

  private blocked(addr: Address): boolean {
    if (inRanges(addr, this.allowed)) return false;
    const embedded = addr.kind() === 'ipv6' ? embeddedIPv4(addr as ipaddr.IPv6) : null;
    if (embedded) return this.blocked(embedded);
    return inRanges(addr, BLOCKED);
  }

  /** The URL's own shape: http(s), no credentials, and not a literal blocked address. */
  checkUrl(raw: string): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new OutboundRefused('not a valid URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundRefused('only http and https URLs are allowed');
    if (url.username || url.password) throw new OutboundRefused('URLs with credentials are not allowed');
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && this.isBlocked(host)) throw new OutboundRefused(`the address ${host} is not allowed`);
    if (LOCAL_NAME.test(host.replace(/\.+$/, '')) && !this.allowed.length) {
      throw new OutboundRefused(`the host ${host} is not allowed`);
    }
    return url;
  }

  /**
   * checkUrl plus a DNS check of every address, for validating a URL when it is submitted. With
   * `allowUnresolved`, a host name that does not resolve (now) passes: nothing can be reached
   * through it, and the download or delivery checks every address again when it connects.
   */
  async assertPublic(raw: string, opts: { allowUnresolved?: boolean } = {}): Promise<URL> {
    const url = this.checkUrl(raw);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host)) return url;
    let addresses: LookupAddress[];
    try {
      addresses = await this.resolve(host);
    } catch (err) {
      if (opts.allowUnresolved && !(err instanceof OutboundRefused)) return url;
      throw new OutboundRefused(`${host} does not resolve`);
    }
    const bad = addresses.find((a) => this.isBlocked(a.address));
    if (bad) throw new OutboundRefused(`${host} resolves to a blocked address (${bad.address})`);
    return url;
  }

  /**
   * Every address of a host (or the literal address), refused with OutboundRefused when any of them
   * is blocked: for connections made outside undici (the egress guard proxy of yt-dlp).
   */
  async lookupChecked(host: string): Promise<LookupAddress[]> {
    const bare = host.replace(/^\[|\]$/g, '');
    const family = isIP(bare);
    const addresses = family ? [{ address: bare, family }] : await this.resolve(bare);
    const bad = addresses.find((a) => this.isBlocked(a.address));
    if (bad) throw new OutboundRefused(bare === bad.address ? `the address ${bare} is not allowed` : `${bare} resolves to a blocked address (${bad.address})`);
    if (!addresses.length) throw new OutboundRefused(`${bare} has no address`);
    return addresses;
  }

  private resolve(host: string): Promise<LookupAddress[]> {
    return new Promise<LookupAddress[]>((resolve, reject) => dnsLookup(host, { all: true }, (err, list) => (err ? reject(err) : resolve(list))));
  }

  /**
   * fetch that applies the policy to every hop and every connection; follows up to `maxRedirects`
   * redirects. `init.signal` bounds the whole exchange (pass AbortSignal.timeout for a deadline).
   * With `via.proxy` (an http(s) forward proxy) the request is tunnelled through the proxy: the
   * proxy connects and resolves, so each hop's target is checked here first (shape and the DNS
   * answer seen from here; a name only the proxy can resolve passes).
   */
  async fetch(raw: string, init: RequestInit = {}, maxRedirects = 5, via: { proxy?: string | undefined } = {}): Promise<Response> {
    let url = this.checkUrl(raw);
    const dispatcher: Dispatcher = via.proxy ? this.proxyAgent(via.proxy) : this.agent;
    for (let hop = 0; ; hop++) {
      if (via.proxy) await this.assertPublic(url.toString(), { allowUnresolved: true });
      let res: Response;
      try {
        res = await undiciFetch(url, { ...init, redirect: 'manual', dispatcher });
      } catch (err) {
        const cause = (err as { cause?: unknown }).cause;
        if (cause instanceof OutboundRefused) throw cause;
        throw err;
      }
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        if (hop >= maxRedirects) throw new OutboundRefused('too many redirects');
        await res.body?.cancel();
        url = this.checkUrl(new URL(location, url).toString());
        if (res.status === 303 || ((res.status === 301 || res.status === 302) && init.method && init.method !== 'GET')) {
          init = { ...init, method: 'GET', body: null };
        }
        continue;
      }
      return res;
    }
  }

  private proxyAgent(proxy: string): ProxyAgent {
    let agent = this.proxies.get(proxy);
    if (!agent) {
      // A tunnel (CONNECT) for http:// targets too, as undici 6 did: the proxy sees the same kind of
      // request for every URL (undici 7 and later default to absolute-form requests for http://).
      agent = new ProxyAgent({ uri: proxy, proxyTunnel: true });
      this.proxies.set(proxy, agent);
    }
    return agent;
  }

  async close() {
    await Promise.all([this.agent.close(), ...[...this.proxies.values()].map((a) => a.close())]);
    this.proxies.clear();
  }
}
