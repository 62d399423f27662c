/**
 * The DNS editor pages: `/dns` (the zones the user may read) and `/dns/zones/{zone}` (one zone's
 * records). A records page is rendered at once from the PostgreSQL cache (stale or not), paged and
 * searchable without JavaScript; coordinator/web/pages/dns.ts then refreshes it from the master
 * (`/axfr`) and redraws only when `display_signature` changed, and gives writers the add, edit,
 * delete and bulk-delete forms, all through the DNS API (/api/dns) with the session and its CSRF
 * token. Readers without write rights get no forms.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { formatStockholm, safeString } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement, Principal } from '../accounts/types.js';
import type { DomainDeps } from '../deps.js';
import { AppError, normalizeError } from '../http/errors.js';
import { breakAtDots, html, type SafeHtml } from '../http/html.js';
import { pageErrorHandler, sendPage } from '../http/page.js';
import { canRead, canWrite, requireRead, zoneAccess } from './access.js';
import type { DnsService } from './dns-service.js';

const signedIn: AuthRequirement = { accept: ['session'] };
const hidden = { hide: true } as const;
/** Types the write API takes (the SOA is the master's own). */
const EDITABLE_TYPES = ['A', 'AAAA', 'CNAME', 'MX', 'TXT', 'NS', 'SRV', 'CAA', 'PTR'] as const;
const PAGE_SIZES = [50, 100, 250, 500] as const;

interface Row {
  name: string;
  ttl: number;
  class: string;
  type: string;
  rdata: string;
}

interface Shown {
  rows: Row[];
  recordCount: number;
  page: number;
  perPage: number;
  hasMore: boolean;
  signature: string;
  source: string;
  cachedAt: string | null;
}

export async function dnsPages(base: FastifyInstance, deps: Pick<DomainDeps, 'accounts' | 'config'> & { dns: DnsService }) {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { dns } = deps;
  app.setErrorHandler((error, request, reply) => pageErrorHandler(request, reply, normalizeError(error, request)));
  const access = (request: FastifyRequest) => zoneAccess(request.principal as Principal, deps.accounts, deps.config.DNS_WHITELIST_WRITE);

  app.get('/dns', { schema: hidden, config: { auth: signedIn } }, async (request, reply) => {
    const user = userOf(request);
    const a = await access(request);
    const list = (await dns.zones.list()).filter((zone) => canRead(a, zone.zone));
    const body = html`<div class="card"><h1>DNS zones</h1>
      <p class="muted">Zones you may read. Open one to browse and search its records${list.some((zone) => canWrite(a, zone.zone)) ? ' and change them' : ''}; the same is possible through the <a href="/docs#/dns">DNS API</a> (/api/dns). Routers and ddclient update addresses with <a href="/dyndns">dynamic-DNS tokens</a>.</p>
      ${
        list.length
          ? html`<div class="table-wrap stack"><table id="zone-table"><thead><tr><th>Zone</th><th>Primary server</th><th>Access</th></tr></thead><tbody>${list.map(
              (zone) =>
                html`<tr><td class="mono" data-label="Zone"><a href="/dns/zones/${encodeURIComponent(zone.zone)}">${breakAtDots(zone.zone)}</a></td><td class="mono" data-label="Primary server">${zone.filePath === null ? 'external provider' : breakAtDots(`${zone.server}:${zone.port}`)}</td><td data-label="Access">${canWrite(a, zone.zone) ? 'read and write' : 'read'}</td></tr>`,
            )}</tbody></table></div>`
          : html`<p id="no-zones">You cannot read any zone yet; an administrator grants zone rights.</p>`
      }</div>`;
    return sendPage(reply, { title: 'DNS zones', user, active: 'dns', body });
  });

  app.get(
    '/dns/zones/:zone',
    {
      schema: {
        ...hidden,
        params: z.object({ zone: safeString().min(1).max(254) }),
        querystring: z.object({
          page: z.coerce.number().int().min(1).max(1_000_000).catch(1),
          limit: z.coerce
            .number()
            .int()
            .refine((n) => (PAGE_SIZES as readonly number[]).includes(n))
            .catch(100),
          q: safeString().max(500).optional().catch(undefined),
        }),
      },
      config: { auth: signedIn },
    },
    async (request, reply) => {
      const user = userOf(request);
      const a = await access(request);
      requireRead(a, request.params.zone);
      const zone = await dns.zone(request.params.zone);
      const writable = canWrite(a, zone.zone);
      const { page, limit } = request.query;
      const q = request.query.q?.trim() || undefined;
      const shown = await cachedPage(dns, zone, q, page, limit);
      const parts = writable ? forms(zone.zone) : null;
      const link = (p: number, search: string | undefined) =>
        `/dns/zones/${encodeURIComponent(zone.zone)}?${new URLSearchParams({ page: String(p), limit: String(limit), ...(search ? { q: search } : {}) }).toString()}`;
      const self = (p: number) => link(p, q);
      const body = html`<div class="card dns-editor" id="dns-editor" data-zone="${zone.zone}" data-page="${page}" data-limit="${limit}" data-q="${q ?? ''}"
          data-signature="${shown?.signature ?? ''}" data-writable="${writable ? '1' : '0'}">
        <p class="muted"><a href="/dns">DNS zones</a> /</p>
        <h1 class="mono">${zone.zone}</h1>
        <p id="dns-status" class="muted" role="status" data-source="${shown?.source ?? 'none'}">${
          shown
            ? html`${shown.source === 'from_database_stale' ? 'Cached copy (stale)' : 'Cached copy'} from ${shown.cachedAt ? formatStockholm(new Date(shown.cachedAt)) : '?'}; checking the master for changes…`
            : 'No cached copy of this zone yet: loading it from the master…'
        }</p>
        <form class="dns-search" method="get" action="/dns/zones/${zone.zone}" role="search">
          <label for="dns-q">Search names, addresses, types or data</label>
          <div class="inline-fields"><input id="dns-q" name="q" value="${q ?? ''}" maxlength="500" placeholder="www, 10.1.2, MX, v=spf1">
          <input type="hidden" name="limit" value="${limit}"><button type="submit">Search</button>${q ? html` <a class="button secondary" href="${link(1, undefined)}">Clear</a>` : ''}</div>
        </form>
        ${writable ? parts?.add : ''}
        <div id="dns-paging">${paging(shown, self, q)}</div>
        ${writable ? html`<div class="actions" id="bulk-bar"><button type="button" class="danger" id="bulk-delete" disabled>Delete selected</button><span id="selected-count" class="muted">0 selected</span></div>${parts?.bulk}${parts?.edit}` : ''}
        <div class="table-wrap stack"><table id="record-table"><thead><tr>${writable ? html`<th><input type="checkbox" id="select-all" aria-label="Select every record on this page"></th>` : ''}<th>Name</th><th class="num">TTL</th><th>Class</th><th>Type</th><th>Data</th>${writable ? html`<th></th>` : ''}</tr></thead>
          <tbody id="record-rows">${(shown?.rows ?? []).map((r) => recordRow(r, writable))}</tbody></table></div>
        <p id="no-records" class="muted" ${shown && shown.rows.length ? 'hidden' : ''}>${q ? 'No record matches.' : 'No records on this page.'}</p>
      </div>`;
      return sendPage(reply, { title: `DNS ${zone.zone}`, user, active: 'dns', body, scripts: ['dns.js'] });
    },
  );
}

/** The cached page (or search page) as the API's cache reads answer it, filled from the master on the first visit; null when there is still no cache. */
async function cachedPage(
  dns: DnsService,
  zone: Awaited<ReturnType<DnsService['zone']>>,
  q: string | undefined,
  page: number,
  limit: number,
): Promise<Shown | null> {
  const shown = await cachedRead(dns, zone, q, page, limit);
  if (shown) return shown;
  // No cached copy yet: fill it from the master now, so the first visit is readable without
  // JavaScript too. A master that does not answer leaves it to the page's script (and its message).
  try {
    await dns.refresh(zone, 1, 1);
  } catch {
    return null;
  }
  return cachedRead(dns, zone, q, page, limit);
}

async function cachedRead(
  dns: DnsService,
  zone: Awaited<ReturnType<DnsService['zone']>>,
  q: string | undefined,
  page: number,
  limit: number,
): Promise<Shown | null> {
  if (q) {
    try {
      const s = await dns.search(zone, q, page, limit);
      return shownOf(s, s.source, s.cached_at);
    } catch (err) {
      if (err instanceof AppError && err.reason === 'cache_unavailable') return null;
      throw err;
    }
  }
  const c = await dns.cacheHelper(zone, page, limit);
  return c.source === 'needs_axfr' ? null : shownOf(c, c.source, c.cached_at);
}

function shownOf(
  p: { zoneData: Row[]; record_count: number; page: number; per_page: number; has_more: boolean; display_signature: string },
  source: string,
  cachedAt: string,
): Shown {
  return {
    rows: p.zoneData,
    recordCount: p.record_count,
    page: p.page,
    perPage: p.per_page,
    hasMore: p.has_more,
    signature: p.display_signature,
    source,
    cachedAt,
  };
}

function paging(shown: Shown | null, self: (page: number) => string, q: string | undefined): SafeHtml {
  if (!shown) return html``;
  const pages = Math.max(1, Math.ceil(shown.recordCount / shown.perPage));
  const first = shown.recordCount ? (shown.page - 1) * shown.perPage + 1 : 0;
  const last = Math.min(shown.recordCount, (shown.page - 1) * shown.perPage + shown.rows.length);
  return html`<nav class="paging" aria-label="Pages">
    ${shown.page > 1 ? html`<a id="prev-page" href="${self(shown.page - 1)}">← Previous</a>` : html`<span class="muted">← Previous</span>`}
    <span id="page-info">Page ${shown.page} of ${pages} · ${q ? 'matches' : 'records'} ${first}–${last} of <strong id="record-count">${shown.recordCount}</strong></span>
    ${shown.hasMore ? html`<a id="next-page" href="${self(shown.page + 1)}">Next →</a>` : html`<span class="muted">Next →</span>`}
    <form class="goto-page" method="get"><label for="goto-page">Go to page</label><input id="goto-page" name="page" type="number" min="1" max="${pages}" value="${shown.page}">
      <input type="hidden" name="limit" value="${shown.perPage}">${q ? html`<input type="hidden" name="q" value="${q}">` : ''}<button type="submit" class="secondary">Go</button></form>
  </nav>`;
}

function recordRow(r: Row, writable: boolean): SafeHtml {
  const editable = writable && (EDITABLE_TYPES as readonly string[]).includes(r.type);
  return html`<tr data-name="${r.name}" data-type="${r.type}" data-rdata="${r.rdata}" data-ttl="${r.ttl}">${
    writable
      ? html`<td data-label="Select">${editable ? html`<input type="checkbox" class="select-row" aria-label="Select ${r.name} ${r.type}">` : ''}</td>`
      : ''
  }<td class="mono" data-label="Name">${r.name}</td><td class="num" data-label="TTL">${r.ttl}</td><td data-label="Class">${r.class}</td><td data-label="Type">${r.type}</td><td class="mono rdata" data-label="Data">${r.rdata}</td>${
    writable
      ? html`<td class="row-actions">${editable ? html`<button type="button" class="secondary edit-row">Edit</button> <button type="button" class="danger delete-row">Delete</button>` : ''}</td>`
      : ''
  }</tr>`;
}

/** The writers' forms (sent by dns.ts to the API with the page's CSRF token in the X-CSRF-Token header). */
function forms(zone: string): { add: SafeHtml; edit: SafeHtml; bulk: SafeHtml } {
  const typeOptions = EDITABLE_TYPES.map((t) => html`<option value="${t}">${t}</option>`);
  const field = (form: string, name: string, label: string, input: SafeHtml) =>
    html`<div class="field"><label for="${form}-${name}">${label}</label>${input}<p class="error field-error" id="${form}-${name}-error" hidden></p></div>`;
  const add = html`<section class="panel" id="add-card"><h2>Add a record</h2>
      <form id="add-form" novalidate>
        <div class="grid-fields">
          ${field('add', 'domain', 'Name', html`<input id="add-domain" name="domain" placeholder="www.${zone}" maxlength="300">`)}
          ${field('add', 'type', 'Type', html`<select id="add-type" name="type">${typeOptions}</select>`)}
          ${field('add', 'target', 'Data', html`<input id="add-target" name="target" placeholder="10.0.0.1" maxlength="4000">`)}
          ${field('add', 'ttl', 'TTL (seconds)', html`<input id="add-ttl" name="ttl" inputmode="numeric" placeholder="default">`)}
        </div>
        <p class="error" id="add-error" role="alert" hidden></p>
        <button type="submit">Add</button>
      </form></section>`;
  const edit = html`<section class="panel" id="edit-card" hidden><h2>Edit a record</h2>
      <form id="edit-form" novalidate>
        <p class="mono" id="edit-what"></p>
        <div class="grid-fields">
          ${field('edit', 'new_target', 'Data', html`<input id="edit-new_target" name="new_target" maxlength="4000">`)}
          ${field('edit', 'ttl', 'TTL (seconds)', html`<input id="edit-ttl" name="ttl" inputmode="numeric">`)}
        </div>
        <p class="error" id="edit-error" role="alert" hidden></p>
        <button type="submit">Save</button> <button type="button" class="secondary" id="edit-cancel">Cancel</button>
      </form></section>`;
  const bulk = html`<section class="panel" id="bulk-card" hidden><h2>Bulk delete</h2>
      <progress id="bulk-progress" max="100" value="0"></progress>
      <dl class="facts bulk-facts">
        <dt>Completed</dt><dd id="bulk-percent">0 %</dd>
        <dt>Processed</dt><dd id="bulk-processed">0</dd>
        <dt>Remaining</dt><dd id="bulk-remaining">0</dd>
        <dt>Current batch</dt><dd id="bulk-batch">–</dd>
        <dt>Deleted</dt><dd id="bulk-deleted">0</dd>
        <dt>Failed</dt><dd id="bulk-failed">0</dd>
        <dt>Elapsed</dt><dd id="bulk-elapsed">0 s</dd>
        <dt>Time left (estimate)</dt><dd id="bulk-eta">–</dd>
      </dl>
      <p id="bulk-state" role="status"></p>
      <ul id="bulk-failures" class="error"></ul>
    </section>`;
  return { add, edit, bulk };
}
