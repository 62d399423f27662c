import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIPv4, isIPv6, type AddressInfo } from 'node:net';

/**
 * A local stand-in for Cloudflare's v4 API (the part the DNS API uses), written from the public API
 * documentation: `GET /zones` (filter `name`), `GET /zones/{id}`, `GET/POST /zones/{id}/dns_records`
 * (filters `name`, `type`; `page`/`per_page` with `result_info`), `PATCH/PUT/DELETE
 * /zones/{id}/dns_records/{rid}`. Every answer is the v4 envelope `{success, errors[{code,message}],
 * messages, result, result_info?}`. Bearer tokens are checked: an unknown token is 401 (9109
 * "Invalid access token"), a token without access to a zone is 403 (10000 "Authentication error").
 * Record rules that the API enforces and the tests meet: an identical record (81058), a CNAME beside
 * other data or other data beside a CNAME (81053/81054), TTL 1 or 60..86400 (9021), A/AAAA content
 * (9005/9006). Failures can be injected: the next N requests answer a status (5xx, 429 with
 * Retry-After), or get no answer at all.
 */

export interface StubRecord {
  id: string;
  zone_id: string;
  zone_name: string;
  type: string;
  name: string;
  content?: string;
  ttl: number;
  priority?: number;
  data?: Record<string, unknown>;
  proxied: boolean;
  created_on: string;
  modified_on: string;
}

export interface StubZone {
  id: string;
  name: string;
  name_servers: string[];
}

export interface StubRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  token: string | null;
  body?: unknown;
}

export interface CloudflareStub {
  /** Base URL for DNS_CLOUDFLARE_API_URL (`http://127.0.0.1:<port>/client/v4`). */
  url: string;
  requests: StubRequest[];
  /** Adds a zone; `tokens` that may access it (others get 403). */
  addZone(name: string, id: string, records?: Array<Partial<StubRecord> & { type: string; name: string }>): StubZone;
  /** A token and the zone ids it may access (`'*'`: all). */
  addToken(token: string, zoneIds: string[] | '*'): void;
  records(zoneId: string): StubRecord[];
  /** Changes made "in the Cloudflare dashboard" (outside the API under test). */
  put(zoneId: string, rec: Partial<StubRecord> & { type: string; name: string }): StubRecord;
  /** After `skip` more requests, the next `n` answer `status` (with Retry-After when given) and change nothing. */
  failNext(n: number, status: number, opts?: { retryAfter?: string; skip?: number }): void;
  /**
   * The next `n` requests (optionally only this method) get no answer (the socket stays silent);
   * they are applied unless `apply: false` (lost on the way in).
   */
  silenceNext(n: number, method?: string, opts?: { apply?: boolean }): void;
  close(): Promise<void>;
}

const TYPES = new Set(['A', 'AAAA', 'CNAME', 'TXT', 'MX', 'NS', 'SRV', 'CAA', 'PTR']);

export async function startCloudflareStub(): Promise<CloudflareStub> {
  const zones = new Map<string, StubZone>();
  const recs = new Map<string, StubRecord[]>();
  const tokens = new Map<string, string[] | '*'>();
  const requests: StubRequest[] = [];
  let fail: { n: number; status: number; retryAfter?: string; skip: number } = { n: 0, status: 0, skip: 0 };
  let silence: { n: number; method?: string; apply: boolean } = { n: 0, apply: true };
  const held: ServerResponse[] = [];

  const now = () => new Date().toISOString();
  const newId = () => randomBytes(16).toString('hex');

  function makeRecord(zone: StubZone, r: Partial<StubRecord> & { type: string; name: string }): StubRecord {
    const t = now();
    return {
      id: r.id ?? newId(),
      zone_id: zone.id,
      zone_name: zone.name,
      type: r.type.toUpperCase(),
      name: fqdn(r.name, zone.name),
      ...(r.content !== undefined ? { content: r.content } : {}),
      ttl: r.ttl ?? 1,
      ...(r.priority !== undefined ? { priority: r.priority } : {}),
      ...(r.data !== undefined ? { data: r.data } : {}),
      proxied: false,
      created_on: t,
      modified_on: t,
    };
  }

  /** Answers; true so that handlers can `return send(...)`. */
  const send = (res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): true => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
    return true;
  };
  const ok = (res: ServerResponse, result: unknown, resultInfo?: object) =>
    send(res, 200, { success: true, errors: [], messages: [], result, ...(resultInfo ? { result_info: resultInfo } : {}) });
  const err = (res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}) =>
    send(res, status, { success: false, errors: [{ code, message }], messages: [], result: null }, headers);

  function paged(res: ServerResponse, all: unknown[], q: Record<string, string>, maxPerPage: number) {
    const perPage = Math.min(Math.max(Number(q.per_page ?? 100) || 100, 5), maxPerPage);
    const page = Math.max(Number(q.page ?? 1) || 1, 1);
    const slice = all.slice((page - 1) * perPage, page * perPage);
    return ok(res, slice, { page, per_page: perPage, count: slice.length, total_count: all.length, total_pages: Math.max(1, Math.ceil(all.length / perPage)) });
  }

  /** The record rules; a message for a 400, or null. */
  function problem(zone: StubZone, r: StubRecord, ignoreId?: string): { code: number; message: string } | null {
    if (!TYPES.has(r.type)) return { code: 9008, message: `DNS record type "${r.type}" is invalid.` };
    if (!(r.name === zone.name || r.name.endsWith(`.${zone.name}`))) return { code: 9007, message: 'DNS record name is not in the zone.' };
    if (r.ttl !== 1 && (r.ttl < 60 || r.ttl > 86400)) return { code: 9021, message: 'Invalid TTL. Must be between 60 and 86400 seconds, or 1 for Automatic.' };
    if (r.type === 'A' && !isIPv4(r.content ?? '')) return { code: 9005, message: 'Content for A record must be a valid IPv4 address.' };
    if (r.type === 'AAAA' && !isIPv6(r.content ?? '')) return { code: 9006, message: 'Content for AAAA record must be a valid IPv6 address.' };
    if (['A', 'AAAA', 'CNAME', 'TXT', 'MX', 'NS', 'PTR'].includes(r.type) && !r.content) return { code: 9009, message: 'Content is required.' };
    if ((r.type === 'SRV' || r.type === 'CAA') && !r.data) return { code: 9101, message: 'Data is required for this record type.' };
    const same = recs.get(zone.id)!.filter((x) => x.id !== ignoreId && x.name === r.name);
    if (
      same.some(
        (x) => x.type === r.type && x.content === r.content && JSON.stringify(x.data ?? null) === JSON.stringify(r.data ?? null) && x.priority === r.priority,
      )
    )
      return { code: 81058, message: 'An identical record already exists.' };
    if (r.type === 'CNAME' && same.length) return { code: 81053, message: 'An A, AAAA, or CNAME record with that host already exists.' };
    if (r.type !== 'CNAME' && same.some((x) => x.type === 'CNAME')) return { code: 81054, message: 'A CNAME record with that host already exists.' };
    return null;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const u = new URL(req.url ?? '/', 'http://stub');
    const query = Object.fromEntries(u.searchParams);
    const auth = req.headers.authorization ?? '';
    const token = /^Bearer (.+)$/.exec(auth)?.[1] ?? null;
    let body: unknown;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (chunks.length) {
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return err(res, 400, 9207, 'Request body is invalid.');
      }
    }
    const path = u.pathname.replace(/^\/client\/v4/, '');
    requests.push({ method: req.method ?? 'GET', path, query, token, ...(body !== undefined ? { body } : {}) });

    if (fail.n > 0 && fail.skip > 0) fail.skip--;
    else if (fail.n > 0) {
      fail.n--;
      if (fail.status === 429)
        return err(res, 429, 971, 'Please wait and consider throttling your request speed', fail.retryAfter ? { 'retry-after': fail.retryAfter } : {});
      return err(res, fail.status, 10001, 'Service unavailable, try again later', fail.retryAfter ? { 'retry-after': fail.retryAfter } : {});
    }
    const silent = silence.n > 0 && (!silence.method || silence.method === req.method);
    if (silent) silence.n--;
    if (silent && !silence.apply) {
      holdResponse(res);
      return true;
    }
    // A silent request is applied, but its answer never leaves: the client sees a timeout.
    const out = silent ? holdResponse(res) : res;

    if (!token) return err(out, 400, 6003, 'Invalid request headers');
    const access = tokens.get(token);
    if (!access) return err(out, 401, 9109, 'Invalid access token');
    const may = (id: string) => access === '*' || access.includes(id);

    let m: RegExpExecArray | null;
    if (path === '/zones' && req.method === 'GET') {
      const list = [...zones.values()].filter((z) => may(z.id) && (!query.name || z.name === query.name));
      return paged(out, list, query, 50);
    }
    if ((m = /^\/zones\/([^/]+)$/.exec(path)) && req.method === 'GET') {
      const z = zones.get(m[1]!);
      if (!z) return err(out, 404, 1001, 'Invalid zone identifier');
      if (!may(z.id)) return err(out, 403, 10000, 'Authentication error');
      return ok(out, { ...z, status: 'active' });
    }
    if ((m = /^\/zones\/([^/]+)\/dns_records(?:\/([^/]+))?$/.exec(path))) {
      const z = zones.get(m[1]!);
      if (!z) return err(out, 404, 7003, 'Could not route to /zones, perhaps your object identifier is invalid?');
      if (!may(z.id)) return err(out, 403, 10000, 'Authentication error');
      const list = recs.get(z.id)!;
      const rid = m[2];
      if (!rid && req.method === 'GET') {
        const found = list.filter((r) => (!query.name || r.name === query.name) && (!query.type || r.type === query.type.toUpperCase()));
        return paged(out, found, query, 5000);
      }
      if (!rid && req.method === 'POST') {
        const b = (body ?? {}) as Partial<StubRecord> & { type?: string; name?: string };
        if (!b.type || !b.name) return err(out, 400, 9000, 'DNS name and type are required.');
        const r = makeRecord(z, { ...b, type: b.type, name: b.name });
        const p = problem(z, r);
        if (p) return err(out, 400, p.code, p.message);
        list.push(r);
        return ok(out, r);
      }
      const i = list.findIndex((r) => r.id === rid);
      if (i < 0) return err(out, 404, 81044, 'Record does not exist.');
      if (req.method === 'DELETE') {
        list.splice(i, 1);
        return ok(out, { id: rid });
      }
      if (req.method === 'PUT' || req.method === 'PATCH') {
        const b = (body ?? {}) as Partial<StubRecord>;
        const cur = list[i]!;
        const merged = req.method === 'PUT' ? { ...b, id: cur.id, type: b.type ?? '', name: b.name ?? '' } : { ...cur, ...b, id: cur.id };
        const r = { ...makeRecord(z, merged), created_on: cur.created_on };
        const p = problem(z, r, cur.id);
        if (p) return err(out, 400, p.code, p.message);
        list[i] = r;
        return ok(out, r);
      }
    }
    return err(out, 404, 7000, 'No route for that URI');
  }

  /** A response object whose writes go nowhere; the real one is kept open until close(). */
  function holdResponse(res: ServerResponse): ServerResponse {
    held.push(res);
    return { writeHead: () => undefined, end: () => undefined } as unknown as ServerResponse;
  }

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch(() => {
      if (!res.headersSent) void err(res, 500, 10000, 'stub error');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}/client/v4`,
    requests,
    addZone(name, id, records = []) {
      const z = { id, name, name_servers: ['ada.ns.cloudflare.com', 'bob.ns.cloudflare.com'] };
      zones.set(id, z);
      recs.set(id, []);
      for (const r of records) recs.get(id)!.push(makeRecord(z, r));
      return z;
    },
    addToken(token, zoneIds) {
      tokens.set(token, zoneIds);
    },
    records: (zoneId) => [...(recs.get(zoneId) ?? [])],
    put(zoneId, r) {
      const z = zones.get(zoneId)!;
      const rec = makeRecord(z, r);
      recs.get(zoneId)!.push(rec);
      return rec;
    },
    failNext(n, status, opts = {}) {
      fail = { n, status, skip: opts.skip ?? 0, ...(opts.retryAfter ? { retryAfter: opts.retryAfter } : {}) };
    },
    silenceNext(n, method, opts = {}) {
      silence = { n, apply: opts.apply ?? true, ...(method ? { method } : {}) };
    },
    async close() {
      for (const r of held) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function fqdn(name: string, zone: string): string {
  const n = name.toLowerCase().replace(/\.$/, '');
  if (n === '@' || n === zone) return zone;
  return n.endsWith(`.${zone}`) ? n : `${n}.${zone}`;
}
