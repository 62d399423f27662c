import { OutboundRefused, type OutboundPolicy } from '@sonar/shared';
import type { parseFeed as ParseFeed } from 'feedsmith';
import { Parser } from 'htmlparser2';

/** One feed found for a source: validated by parsing it. */
export interface ResolvedFeed {
  url: string;
  type: 'rss' | 'atom' | 'rdf' | 'json';
  title: string | null;
  site_url: string | null;
  item_count: number;
}

export interface Resolution {
  /** How the feeds were found: the URL is a feed, the page links them, or a common path answered. */
  resolved_via: 'direct' | 'link' | 'common_path' | 'none';
  /** The URL the source answered from after redirects. */
  final_url: string;
  feeds: ResolvedFeed[];
  /** Candidates that were tried and did not parse as feeds, with why. */
  rejected: Array<{ url: string; reason: string }>;
}

/** The source itself could not be fetched: the caller's URL (4xx from the site, refused by policy) or the site (unreachable, 5xx). */
export class SourceFetchError extends Error {
  constructor(
    message: string,
    /** `http`: the site answered 4xx; `server`: it answered 5xx. */
    readonly kind: 'refused' | 'unreachable' | 'http' | 'server' | 'too_large' | 'timeout',
  ) {
    super(message);
  }
}

/** Feed media types a page may link as `<link rel="alternate" type="…">`. */
const FEED_TYPES = new Set([
  'application/rss+xml',
  'application/atom+xml',
  'application/rdf+xml',
  'application/feed+json',
  'application/json',
  'text/xml',
  'application/xml',
]);
/** Paths sites commonly serve their feed at, tried at the site root when the page links none. */
const COMMON_PATHS = ['/feed', '/rss', '/feed.xml', '/rss.xml', '/atom.xml', '/index.xml', '/feed.json', '/feed/atom', '/?feed=rss2'];

export interface ResolverLimits {
  /** Largest body read from any one URL. */
  maxBytes: number;
  /** Deadline of one fetch (redirects included). */
  fetchTimeoutMs: number;
  /** Deadline of the whole resolution. */
  totalTimeoutMs: number;
  /** Most candidate URLs fetched besides the source. */
  maxCandidates: number;
}

export const DEFAULT_LIMITS: ResolverLimits = { maxBytes: 2 * 1024 * 1024, fetchTimeoutMs: 10_000, totalTimeoutMs: 25_000, maxCandidates: 8 };

/**
 * Finds the feeds of a site, page or feed URL, the way feed readers do: the URL itself when it
 * parses as a feed; else the feeds its HTML links with `<link rel="alternate">`; else common feed
 * paths at the site root. Every candidate is fetched through the outbound (SSRF) policy, each hop
 * checked, with size and time limits, and kept only when a feed parser (feedsmith: RSS, Atom, RDF,
 * JSON Feed) reads it.
 */
export class FeedResolver {
  constructor(
    private readonly outbound: OutboundPolicy,
    private readonly limits: ResolverLimits = DEFAULT_LIMITS,
  ) {}

  async resolve(source: string): Promise<Resolution> {
    const deadline = AbortSignal.timeout(this.limits.totalTimeoutMs);
    const first = await this.get(source, deadline);
    const direct = await readFeed(first.body, first.url);
    if (direct.ok) return { resolved_via: 'direct', final_url: first.url, feeds: [direct.feed], rejected: [] };

    const rejected: Resolution['rejected'] = [];
    const linked = first.html ? linkedFeeds(first.body, first.url) : [];
    const fromLinks = await this.tryAll(linked, deadline, rejected);
    if (fromLinks.length) return { resolved_via: 'link', final_url: first.url, feeds: fromLinks, rejected };

    const root = new URL(first.url);
    const common = COMMON_PATHS.map((p) => new URL(p, root.origin).toString()).filter((u) => u !== first.url && !linked.includes(u));
    const found: ResolvedFeed[] = [];
    // Common paths: the first one that parses is the site's feed (they are usually aliases of one another).
    for (const url of common.slice(0, Math.max(0, this.limits.maxCandidates - linked.length))) {
      const [feed] = await this.tryAll([url], deadline, rejected, true);
      if (feed) {
        found.push(feed);
        break;
      }
    }
    return { resolved_via: found.length ? 'common_path' : 'none', final_url: first.url, feeds: found, rejected };
  }

  private async tryAll(urls: string[], deadline: AbortSignal, rejected: Resolution['rejected'], quietMissing = false): Promise<ResolvedFeed[]> {
    const feeds: ResolvedFeed[] = [];
    for (const url of urls.slice(0, this.limits.maxCandidates)) {
      if (deadline.aborted) break;
      try {
        const got = await this.get(url, deadline);
        const parsed = await readFeed(got.body, got.url);
        if (parsed.ok) {
          if (!feeds.some((f) => f.url === parsed.feed.url)) feeds.push(parsed.feed);
        } else rejected.push({ url, reason: parsed.reason });
      } catch (err) {
        if (!(quietMissing && err instanceof SourceFetchError && err.kind === 'http')) rejected.push({ url, reason: (err as Error).message });
      }
    }
    return feeds;
  }

  /** One GET through the outbound policy, at most `maxBytes`, within the fetch and overall deadlines. */
  private async get(url: string, deadline: AbortSignal): Promise<{ url: string; body: string; html: boolean }> {
    const signal = AbortSignal.any([deadline, AbortSignal.timeout(this.limits.fetchTimeoutMs)]);
    let res: FetchResponse;
    try {
      res = await this.outbound.fetch(url, {
        signal,
        headers: {
          accept: 'application/rss+xml, application/atom+xml, application/feed+json, application/xml;q=0.9, text/html;q=0.8, */*;q=0.5',
          'user-agent': 'sonar-feed-resolver',
        },
      });
    } catch (err) {
      if (err instanceof OutboundRefused) throw new SourceFetchError(`refused by the outbound policy: ${err.message}`, 'refused');
      if (signal.aborted) throw new SourceFetchError(`${url}: no answer within ${Math.round(this.limits.fetchTimeoutMs / 1000)} s`, 'timeout');
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new SourceFetchError(`${url}: ${cause?.code ?? cause?.message ?? (err as Error).message}`, 'unreachable');
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw new SourceFetchError(`${url}: HTTP ${res.status}`, res.status >= 500 ? 'server' : 'http');
    }
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > this.limits.maxBytes) {
      await res.body?.cancel().catch(() => undefined);
      throw new SourceFetchError(`${url}: ${declared} bytes is more than the ${this.limits.maxBytes} allowed`, 'too_large');
    }
    const body = await readLimited(res, this.limits.maxBytes, url);
    const type = (res.headers.get('content-type') ?? '').toLowerCase();
    return { url: res.url || url, body, html: type.includes('html') || /^\s*(<!doctype html|<html)/i.test(body.slice(0, 512)) };
  }
}

type FetchResponse = Awaited<ReturnType<OutboundPolicy['fetch']>>;

/** The body as text, refusing more than `max` bytes (whatever Content-Length said). */
async function readLimited(res: FetchResponse, max: number, url: string): Promise<string> {
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > max) {
      await res.body.cancel().catch(() => undefined);
      throw new SourceFetchError(`${url}: more than the ${max} bytes allowed`, 'too_large');
    }
    chunks.push(chunk);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

type FeedRead = { ok: true; feed: ResolvedFeed } | { ok: false; reason: string };

/** Parses `body` as a feed (any of the four formats); the reason when it is not one. */
async function readFeed(body: string, url: string): Promise<FeedRead> {
  if (!body.trim()) return { ok: false, reason: 'empty document' };
  // Loaded on first use: only this route needs the feed parsers (they are over a megabyte of the process's memory).
  const { parseFeed } = await import('feedsmith');
  let parsed: ReturnType<typeof ParseFeed>;
  try {
    parsed = parseFeed(body);
  } catch (err) {
    return { ok: false, reason: `not a feed: ${(err as Error).message}` };
  }
  const { format, feed } = parsed as { format: ResolvedFeed['type']; feed: Record<string, unknown> };
  const items = (feed.items ?? feed.entries ?? []) as unknown[];
  return {
    ok: true,
    feed: { url, type: format, title: text(feed.title), site_url: siteLink(format, feed, url), item_count: Array.isArray(items) ? items.length : 0 },
  };
}

/** A text construct: a string, or (Atom) `{ value }`. */
function text(v: unknown): string | null {
  const s = typeof v === 'object' && v !== null && 'value' in v ? v.value : v;
  return typeof s === 'string' && s.trim() ? s.trim() : null;
}

/** The site a feed belongs to: RSS/RDF `link`, Atom's `rel="alternate"` link, JSON Feed's `home_page_url`. */
function siteLink(format: ResolvedFeed['type'], feed: Record<string, unknown>, base: string): string | null {
  let raw: string | null;
  if (format === 'json') raw = text(feed.home_page_url);
  else if (format === 'atom') {
    const links = Array.isArray(feed.links) ? (feed.links as Array<{ href?: string; rel?: string }>) : [];
    raw = text((links.find((l) => (l.rel ?? 'alternate') === 'alternate') ?? links[0])?.href);
  } else raw = text(feed.link);
  if (!raw) return null;
  try {
    return new URL(raw, base).toString();
  } catch {
    return null;
  }
}

/** `<link rel="alternate" type="<feed type>" href>` of an HTML page, resolved against the page (and `<base href>`). */
export function linkedFeeds(html: string, pageUrl: string): string[] {
  const found: string[] = [];
  let base = pageUrl;
  const parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name === 'base' && attrs.href) {
          try {
            base = new URL(attrs.href, pageUrl).toString();
          } catch {
            /* an unusable <base> is ignored, as browsers do */
          }
        }
        if (name !== 'link' || !attrs.href) return;
        const rel = (attrs.rel ?? '').toLowerCase().split(/\s+/);
        const type = (attrs.type ?? '').toLowerCase().split(';')[0]!.trim();
        if (!rel.includes('alternate') || !FEED_TYPES.has(type)) return;
        try {
          const url = new URL(attrs.href, base);
          if ((url.protocol === 'http:' || url.protocol === 'https:') && !found.includes(url.toString())) found.push(url.toString());
        } catch {
          /* not a URL */
        }
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  return found;
}
