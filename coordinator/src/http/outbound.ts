import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, ProxyAgent, fetch as undiciFetch, type Dispatcher, type RequestInit, type Response } from 'undici';
import { IpRangeSet } from './ip-ranges.js';

/**
 * Addresses a server-side request must never reach unless an administrator allows them: loopback,
 * private, carrier-grade NAT, link-local (cloud metadata lives at 169.254.169.254), unique-local,
 * multicast, reserved and documentation ranges.
 */
const BLOCKED = new IpRangeSet([
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24',
  '192.0.2.0/24', '192.88.99.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24',
  '224.0.0.0/4', '240.0.0.0/4', '255.255.255.255/32',
  '::/128', '::1/128', '64:ff9b::/96', '100::/64', '2001:db8::/32', 'fc00::/7', 'fe80::/10', 'ff00::/8',
]);

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
  private readonly allowed: IpRangeSet;
  private readonly agent: Agent;
  private readonly proxies = new Map<string, ProxyAgent>();

  constructor(allowRanges: readonly string[] = []) {
    this.allowed = new IpRangeSet(allowRanges);
    this.agent = new Agent({
      connect: {
        lookup: (hostname, options, callback) => {
          dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
            if (err) return callback(err, '', 0);
            const list = addresses as LookupAddress[];
            const bad = list.find((a) => this.isBlocked(a.address));
            if (bad) return callback(new OutboundRefused(`${hostname} resolves to a blocked address (${bad.address})`), '', 0);
            const first = list[0];
            if (!first) return callback(new Error(`${hostname} has no address`), '', 0);
            // undici asks for one address unless `all` was requested.
            if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
            else callback(null, first.address, first.family);
          });
        },
      },
    });
  }

  isBlocked(ip: string): boolean {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1];
    const addr = mapped ?? ip;
    return BLOCKED.has(addr) && !this.allowed.has(addr);
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
    if (/^(localhost|.*\.localhost|.*\.local|.*\.internal)$/i.test(host) && !this.allowed.size) {
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
   * fetch that applies the policy to every hop and every connection; follows up to 5 redirects.
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
      agent = new ProxyAgent({ uri: proxy });
      this.proxies.set(proxy, agent);
    }
    return agent;
  }

  async close() {
    await Promise.all([this.agent.close(), ...[...this.proxies.values()].map((a) => a.close())]);
    this.proxies.clear();
  }
}
