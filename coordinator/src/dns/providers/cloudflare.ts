/**
 * Cloudflare's v4 REST API, the calls the DNS API needs: GET /zones?name=, GET /zones/{id},
 * GET/POST /zones/{id}/dns_records (paged with page/per_page and result_info), PATCH and DELETE
 * /zones/{id}/dns_records/{rid}. Plain fetch rather than the official `cloudflare` client: these
 * few calls are all that is used, and the answer to the caller depends on what the API said
 * exactly (status, the `errors[]` codes, Retry-After of a 429), which the generated client retries
 * away (429 and 5xx) and wraps in its own error classes; it would also be a large dependency
 * (thousands of generated files) for five endpoints.
 */
import { AppError, validationFailed } from '../../http/errors.js';
import { RETRY_AFTER_SECONDS } from '../../infra/unavailable.js';
import { publicRef } from './token-ref.js';
import { normalizeName, parseRdata, renderRdata, type DnsRecord, type ValidRecord } from '../wire/index.js';

/** What a Cloudflare DNS record looks like on the wire (the fields used). */
export interface CfRecord {
  id: string;
  type: string;
  name: string;
  content?: string;
  ttl: number;
  priority?: number;
  data?: Record<string, unknown>;
}

export interface CfZone {
  id: string;
  name: string;
  name_servers?: string[];
}

interface Envelope<T> {
  success?: boolean;
  errors?: Array<{ code?: number; message?: string }>;
  result?: T;
  result_info?: { page?: number; per_page?: number; total_pages?: number; count?: number; total_count?: number };
}

/** A Cloudflare answer other than success, or no answer. */
export class CloudflareError extends Error {
  constructor(
    message: string,
    /** HTTP status; 0 when no answer came (connection failed, timeout). */
    readonly status: number,
    readonly codes: number[] = [],
    readonly retryAfter?: string,
    readonly path = '',
    /** For a call without an answer: whether the request may have reached Cloudflare (false: the connection itself failed). */
    readonly maybeSent = false,
  ) {
    super(message);
    this.name = 'CloudflareError';
  }
}

/** Cloudflare name servers: `<name>.ns.cloudflare.com`. */
export const isCloudflareNameServer = (host: string) => /(^|\.)ns\.cloudflare\.com$/.test(normalizeName(host));

/** `ttl: 1` is Cloudflare's "automatic", 300 seconds. */
const AUTO_TTL = 300;

export class CloudflareClient {
  constructor(private readonly opts: { baseUrl: string; token: string; timeoutMs: number; perPage?: number }) {}

  private async call<T>(method: string, path: string, query?: Record<string, string | number>, body?: unknown): Promise<Envelope<T>> {
    const url = new URL(`${this.opts.baseUrl.replace(/\/+$/, '')}${path}`);
    for (const [k, v] of Object.entries(query ?? {})) url.searchParams.set(k, String(v));
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${this.opts.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.opts.timeoutMs),
        redirect: 'error',
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      const why = e.name === 'TimeoutError' ? `no answer within ${this.opts.timeoutMs} ms` : (e.cause?.code ?? e.cause?.message ?? e.message);
      const notSent = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT'].includes(e.cause?.code ?? '');
      throw new CloudflareError(`${method} ${path}: the Cloudflare API could not be reached (${why})`, 0, [], undefined, path, !notSent);
    }
    const text = await res.text().catch(() => '');
    let env: Envelope<T>;
    try {
      env = text ? (JSON.parse(text) as Envelope<T>) : {};
    } catch {
      env = {};
    }
    if (!res.ok || env.success === false) {
      const errs = (env.errors ?? []).map((e) => `${e.code ?? '?'} ${e.message ?? ''}`.trim());
      throw new CloudflareError(
        `${method} ${path}: Cloudflare answered ${res.status}${errs.length ? `: ${errs.join('; ')}` : ''}`,
        res.status,
        (env.errors ?? []).map((e) => Number(e.code)).filter(Number.isFinite),
        res.headers.get('retry-after') ?? undefined,
        path,
      );
    }
    return env;
  }

  async findZone(name: string): Promise<CfZone | null> {
    const env = await this.call<CfZone[]>('GET', '/zones', { name: normalizeName(name) });
    return env.result?.find((z) => normalizeName(z.name) === normalizeName(name)) ?? null;
  }

  async getZone(id: string): Promise<CfZone> {
    return (await this.call<CfZone>('GET', `/zones/${encodeURIComponent(id)}`)).result!;
  }

  /** Every record (all pages), optionally only at one name and type; `onPage` sees each page as it comes. */
  async listRecords(zoneId: string, filter: { name?: string; type?: string } = {}, onPage?: (records: CfRecord[]) => void): Promise<CfRecord[]> {
    const all: CfRecord[] = [];
    const perPage = this.opts.perPage ?? 500;
    for (let page = 1; ; page++) {
      const env = await this.call<CfRecord[]>('GET', `/zones/${encodeURIComponent(zoneId)}/dns_records`, {
        page,
        per_page: perPage,
        ...(filter.name ? { name: normalizeName(filter.name) } : {}),
        ...(filter.type ? { type: filter.type } : {}),
      });
      const rows = env.result ?? [];
      onPage?.(rows);
      if (!onPage) all.push(...rows);
      const total = env.result_info?.total_pages ?? 1;
      if (page >= total || rows.length === 0) return all;
    }
  }

  async createRecord(zoneId: string, payload: object): Promise<CfRecord> {
    return (await this.call<CfRecord>('POST', `/zones/${encodeURIComponent(zoneId)}/dns_records`, undefined, payload)).result!;
  }

  /** PATCH, not PUT: fields the request does not name (`proxied`, comments, tags) stay as they are. */
  async patchRecord(zoneId: string, id: string, payload: object): Promise<CfRecord> {
    return (await this.call<CfRecord>('PATCH', `/zones/${encodeURIComponent(zoneId)}/dns_records/${encodeURIComponent(id)}`, undefined, payload)).result!;
  }

  async deleteRecord(zoneId: string, id: string): Promise<void> {
    await this.call('DELETE', `/zones/${encodeURIComponent(zoneId)}/dns_records/${encodeURIComponent(id)}`);
  }
}

/** A Cloudflare record as a zone row (rdata in the same canonical form a validated record has), or null for types not modelled. */
export function rowOf(r: CfRecord): DnsRecord | null {
  const type = r.type.toUpperCase();
  const content = r.content ?? '';
  const d = r.data ?? {};
  const str = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
  let text: string;
  switch (type) {
    case 'MX':
      text = `${r.priority ?? 0} ${content}`;
      break;
    case 'SRV':
      text = `${Number(d.priority ?? r.priority ?? 0)} ${Number(d.weight ?? 0)} ${Number(d.port ?? 0)} ${str(d.target)}`;
      break;
    case 'CAA':
      text = `${Number(d.flags ?? 0)} ${str(d.tag)} "${str(d.value).replace(/["\\]/g, (c) => `\\${c}`)}"`;
      break;
    default:
      text = content;
  }
  const quotedTxt = type === 'TXT' && content.trimStart().startsWith('"');
  const v = parseRdata(type, text, { lenient: type !== 'TXT' || quotedTxt });
  if (!v.ok) return null;
  return { name: normalizeName(r.name), ttl: r.ttl === 1 ? AUTO_TTL : r.ttl, class: 'IN', type, rdata: renderRdata(v.value) };
}

/** The POST/PUT body of a validated record. */
export function payloadOf(r: ValidRecord, ttl: number): Record<string, unknown> {
  const base = { type: r.type, name: r.name, ttl };
  const d = r.data;
  switch (d.type) {
    case 'MX':
      return { ...base, content: d.exchange, priority: d.preference };
    case 'SRV':
      return { ...base, data: { priority: d.priority, weight: d.weight, port: d.port, target: d.target } };
    case 'CAA':
      return { ...base, data: { flags: d.flags, tag: d.tag, value: d.value.toString('utf8') } };
    default:
      // A, AAAA: the address; CNAME, NS, PTR: the target; TXT: the quoted character-strings.
      return { ...base, content: r.rdata };
  }
}

/**
 * A Cloudflare failure as a DNS API answer. No answer, 5xx or 429: 503 service_unavailable saying
 * what happened (Retry-After: Cloudflare's own for a 429). 401/403: the token is wrong or lacks
 * rights, which an administrator fixes: 503 naming the token reference. Other 4xx: the request's
 * data (Cloudflare's message under `field`), 400 validation_failed.
 */
export function providerFailure(err: unknown, ctx: { zone: string; tokenRef: string; field?: string }): AppError {
  if (err instanceof AppError) return err;
  if (!(err instanceof CloudflareError)) return new AppError('service_unavailable', `zone ${ctx.zone}: Cloudflare: ${(err as Error).message}`);
  const retry = { 'retry-after': String(RETRY_AFTER_SECONDS) };
  if (err.status === 0 || err.status >= 500)
    return new AppError('service_unavailable', `zone ${ctx.zone}: ${err.message}; nothing was changed by this request's failing call`, { headers: retry });
  if (err.status === 429)
    return new AppError(
      'service_unavailable',
      `zone ${ctx.zone}: Cloudflare rate limit reached (429)${err.retryAfter ? `, retry after ${err.retryAfter} s` : ''}: ${err.message}`,
      {
        headers: { 'retry-after': err.retryAfter && /^\d+$/.test(err.retryAfter) ? err.retryAfter : String(RETRY_AFTER_SECONDS) },
      },
    );
  if (err.status === 401 || err.status === 403 || err.codes.some((c) => c === 10000 || c === 9109))
    return new AppError(
      'service_unavailable',
      `zone ${ctx.zone}: Cloudflare refused the API token from ${publicRef(ctx.tokenRef)} (${err.message}); an administrator must fix the token or its permissions`,
    );
  // A record that went away meanwhile is the caller's 404; an unknown zone id is a wrong mapping.
  if (err.status === 404 && err.path.includes('/dns_records/')) return new AppError('not_found', `zone ${ctx.zone}: ${err.message}`);
  if (err.status === 404)
    return new AppError('service_unavailable', `zone ${ctx.zone}: ${err.message}; the zone id of the provider mapping is wrong (dns:providers:list)`);
  // Cloudflare's message names what it refused: a TTL is the `ttl` field's problem, anything else the record data's.
  const f = ctx.field ?? 'target';
  const field = /\bTTL\b/i.test(err.message) ? f.replace(/[a-z_]*target$/, 'ttl') : f;
  return validationFailed({ [field]: [`Cloudflare refused it: ${err.message}`] });
}
