import { formatStockholm } from '@sonar/shared/display';
import { api, ApiError } from '../lib/api.js';
import { byId, byIdAs, el, maybeId } from '../lib/dom.js';

/**
 * The DNS editor's records page (coordinator/src/dns/pages.ts renders it from the cache): refresh
 * from the master and redraw only when `display_signature` changed; for writers the add, edit,
 * delete and bulk-delete forms, all through /api/dns with the session's CSRF token.
 */

interface Row {
  name: string;
  ttl: number;
  class: string;
  type: string;
  rdata: string;
}
interface PageBody {
  zoneData: Row[];
  record_count: number;
  page: number;
  per_page: number;
  has_more: boolean;
  display_signature: string;
  cached_at?: string;
  source?: string;
}
interface BulkBody {
  ok: boolean;
  results: Array<{ ok: boolean; domain: string; type: string; target: string; reason?: string; message?: string }>;
}

const EDITABLE = new Set(['A', 'AAAA', 'CNAME', 'MX', 'TXT', 'NS', 'SRV', 'CAA', 'PTR']);
/** Deletes per bulk request (the API takes up to 100): small enough that progress moves visibly. */
const BULK_BATCH = 25;

const root = byId('dns-editor');
const zone = root.dataset.zone ?? '';
const page = Number(root.dataset.page ?? '1');
const limit = Number(root.dataset.limit ?? '100');
const q = root.dataset.q ?? '';
const writable = root.dataset.writable === '1';
let signature = root.dataset.signature ?? '';
const status = byId('dns-status');
const tbody = byId('record-rows');
const enc = encodeURIComponent;

const pageUrl = (p: number) => `/dns/zones/${enc(zone)}?${new URLSearchParams({ page: String(p), limit: String(limit), ...(q ? { q } : {}) }).toString()}`;

/** The current page as the cache has it now (a search when `q` is set). */
const cachedRead = () =>
  api<PageBody>(
    q
      ? `/api/dns/zones/${enc(zone)}/search?${new URLSearchParams({ q, page: String(page), limit: String(limit) }).toString()}`
      : `/api/dns/zones/${enc(zone)}/cache?page=${page}&limit=${limit}`,
  );

/** Redraws the table and the paging when the page differs from what is shown; says whether it did. */
function show(body: PageBody): boolean {
  if (body.display_signature === signature) return false;
  signature = body.display_signature;
  root.dataset.signature = signature;
  tbody.replaceChildren(...body.zoneData.map(rowOf));
  byId('no-records').hidden = body.zoneData.length > 0;
  drawPaging(body);
  updateSelection();
  return true;
}

function rowOf(r: Row): HTMLTableRowElement {
  const tr = el('tr', { data: { name: r.name, type: r.type, rdata: r.rdata, ttl: String(r.ttl) } });
  const editable = writable && EDITABLE.has(r.type);
  if (writable) {
    const td = el('td', { data: { label: 'Select' } });
    if (editable) {
      const box = el('input', { className: 'select-row' });
      box.type = 'checkbox';
      box.setAttribute('aria-label', `Select ${r.name} ${r.type}`);
      td.append(box);
    }
    tr.append(td);
  }
  tr.append(
    // data-label: the column's name, shown before the value where the rows stack (phones)
    el('td', { className: 'mono', text: r.name, data: { label: 'Name' } }),
    el('td', { className: 'num', text: String(r.ttl), data: { label: 'TTL' } }),
    el('td', { text: r.class, data: { label: 'Class' } }),
    el('td', { text: r.type, data: { label: 'Type' } }),
    el('td', { className: 'mono rdata', text: r.rdata, data: { label: 'Data' } }),
  );
  if (writable) {
    const td = el('td', { className: 'row-actions' });
    if (editable) {
      const edit = el('button', { className: 'secondary edit-row', text: 'Edit' });
      const del = el('button', { className: 'danger delete-row', text: 'Delete' });
      edit.type = 'button';
      del.type = 'button';
      td.append(edit, ' ', del);
    }
    tr.append(td);
  }
  return tr;
}

function drawPaging(body: PageBody) {
  const pages = Math.max(1, Math.ceil(body.record_count / body.per_page));
  const first = body.record_count ? (body.page - 1) * body.per_page + 1 : 0;
  const last = Math.min(body.record_count, (body.page - 1) * body.per_page + body.zoneData.length);
  const nav = el('nav', { className: 'paging' });
  nav.setAttribute('aria-label', 'Pages');
  const link = (id: string, text: string, p: number, on: boolean) => {
    if (!on) return el('span', { className: 'muted', text });
    const a = el('a', { text });
    a.id = id;
    a.href = pageUrl(p);
    return a;
  };
  const info = el('span', { text: `Page ${body.page} of ${pages} · ${q ? 'matches' : 'records'} ${first}–${last} of ` });
  info.id = 'page-info';
  const count = el('strong', { text: String(body.record_count) });
  count.id = 'record-count';
  info.append(count);
  // Go to page N: a plain GET form, as the server renders it.
  const form = el('form', { className: 'goto-page' });
  form.method = 'get';
  const label = el('label', { text: 'Go to page' });
  label.htmlFor = 'goto-page';
  const input = el('input');
  Object.assign(input, { id: 'goto-page', name: 'page', type: 'number', min: '1', max: String(pages), value: String(body.page) });
  const hidden = (name: string, value: string) => Object.assign(el('input'), { type: 'hidden', name, value });
  const go = el('button', { className: 'secondary', text: 'Go' });
  go.type = 'submit';
  form.append(label, input, hidden('limit', String(body.per_page)), ...(q ? [hidden('q', q)] : []), go);
  nav.append(link('prev-page', '← Previous', body.page - 1, body.page > 1), ' ', info, ' ', link('next-page', 'Next →', body.page + 1, body.has_more), form);
  byId('dns-paging').replaceChildren(nav);
}

/** Refresh from the master (`/axfr`: an SOA check, a transfer only when the serial moved), then the page. */
async function refresh() {
  try {
    const fresh = await api<PageBody>(`/api/dns/zones/${enc(zone)}/axfr?page=${q ? 1 : page}&limit=${q ? 1 : limit}`);
    const body = q ? await cachedRead() : fresh;
    const changed = show(body);
    status.dataset.source = 'master';
    status.textContent = `${changed ? 'Updated from the master' : 'Up to date with the master'} (${formatStockholm(fresh.cached_at ?? new Date())}).`;
  } catch (err) {
    status.dataset.source = 'refresh-failed';
    status.textContent = `Could not refresh from the master: ${(err as Error).message} The cached copy is shown.`;
  }
}

/** After a write: the cache rows were synchronised by the API; show the page as it is now. */
async function reload() {
  try {
    show(await cachedRead());
  } catch (err) {
    status.textContent = `Could not reload the page: ${(err as Error).message}`;
  }
}

void refresh();

// ---- writers ------------------------------------------------------------------------------------

interface RowData {
  name: string;
  type: string;
  rdata: string;
  ttl: number;
}
const dataOf = (tr: HTMLElement): RowData => ({
  name: tr.dataset.name ?? '',
  type: tr.dataset.type ?? '',
  rdata: tr.dataset.rdata ?? '',
  ttl: Number(tr.dataset.ttl ?? '0'),
});

/** Shows an API error on a form: field messages under their fields, the rest in the form's alert. */
function showErrors(form: string, err: unknown, fields: readonly string[]) {
  clearErrors(form, fields);
  const general = byId(`${form}-error`);
  if (!(err instanceof ApiError)) {
    general.textContent = (err as Error).message;
    general.hidden = false;
    return;
  }
  const rest: string[] = [];
  for (const [key, messages] of Object.entries(err.errors)) {
    const field = fields.find((f) => key === f || key.endsWith(`.${f}`)) ?? (key === 'target' && fields.includes('new_target') ? 'new_target' : undefined);
    const slot = field ? maybeId(`${form}-${field}-error`) : null;
    if (slot) {
      slot.textContent = messages.join(' ');
      slot.hidden = false;
    } else rest.push(`${key}: ${messages.join(' ')}`);
  }
  general.textContent = [err.message, ...rest].join(' ');
  general.hidden = false;
}
function clearErrors(form: string, fields: readonly string[]) {
  for (const f of fields) {
    const slot = maybeId(`${form}-${f}-error`);
    if (slot) {
      slot.textContent = '';
      slot.hidden = true;
    }
  }
  const general = byId(`${form}-error`);
  general.textContent = '';
  general.hidden = true;
}
const ttlValue = (input: HTMLInputElement): number | string | undefined => {
  const v = input.value.trim();
  if (!v) return undefined;
  return /^\d+$/.test(v) ? Number(v) : v; // anything else goes to the API, which names the problem
};

if (writable) {
  const ADD_FIELDS = ['domain', 'type', 'target', 'ttl'] as const;
  const EDIT_FIELDS = ['new_target', 'ttl'] as const;
  const addForm = byIdAs('add-form', HTMLFormElement);
  const editCard = byId('edit-card');
  const editForm = byIdAs('edit-form', HTMLFormElement);
  let editing: RowData | null = null;

  addForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const button = addForm.querySelector('button[type=submit]');
    if (button instanceof HTMLButtonElement) button.disabled = true;
    const ttl = ttlValue(byIdAs('add-ttl', HTMLInputElement));
    const body = {
      domain: byIdAs('add-domain', HTMLInputElement).value.trim(),
      type: byIdAs('add-type', HTMLSelectElement).value,
      target: byIdAs('add-target', HTMLInputElement).value.trim(),
      ...(ttl !== undefined ? { ttl } : {}),
    };
    api<{ message: string }>('/api/dns/records/add', { method: 'POST', body })
      .then(async (res) => {
        clearErrors('add', ADD_FIELDS);
        status.textContent = res.message;
        addForm.reset();
        await reload();
      })
      .catch((err: unknown) => showErrors('add', err, ADD_FIELDS))
      .finally(() => {
        if (button instanceof HTMLButtonElement) button.disabled = false;
      });
  });

  editForm.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!editing) return;
    const ttl = ttlValue(byIdAs('edit-ttl', HTMLInputElement));
    const body = {
      domain: editing.name,
      type: editing.type,
      old_target: editing.rdata,
      new_target: byIdAs('edit-new_target', HTMLInputElement).value.trim(),
      ...(ttl !== undefined ? { ttl } : {}),
    };
    api<{ message: string }>('/api/dns/records/update', { method: 'POST', body })
      .then(async (res) => {
        status.textContent = res.message;
        editing = null;
        editCard.hidden = true;
        await reload();
      })
      .catch((err: unknown) => showErrors('edit', err, EDIT_FIELDS));
  });
  byId('edit-cancel').addEventListener('click', () => {
    editing = null;
    editCard.hidden = true;
  });

  tbody.addEventListener('click', (event) => {
    const target = event.target;
    if (!(target instanceof HTMLElement)) return;
    const tr = target.closest('tr');
    if (!tr) return;
    const row = dataOf(tr);
    if (target.classList.contains('edit-row')) {
      editing = row;
      clearErrors('edit', EDIT_FIELDS);
      byId('edit-what').textContent = `${row.name} ${row.ttl} ${row.type} ${row.rdata}`;
      byIdAs('edit-new_target', HTMLInputElement).value = row.rdata;
      byIdAs('edit-ttl', HTMLInputElement).value = String(row.ttl);
      editCard.hidden = false;
      editCard.scrollIntoView({ block: 'nearest' });
      byIdAs('edit-new_target', HTMLInputElement).focus();
    } else if (target.classList.contains('delete-row')) {
      if (!window.confirm(`Delete ${row.name} ${row.type} ${row.rdata}?`)) return;
      api<{ message: string }>('/api/dns/records/delete', { method: 'POST', body: { domain: row.name, type: row.type, target: row.rdata } })
        .then(async (res) => {
          status.textContent = res.message;
          await reload();
        })
        .catch((err: unknown) => {
          status.textContent = `Not deleted: ${(err as Error).message}`;
        });
    }
  });

  tbody.addEventListener('change', updateSelection);
  byIdAs('select-all', HTMLInputElement).addEventListener('change', (event) => {
    const on = (event.target as HTMLInputElement).checked;
    for (const box of selectBoxes()) box.checked = on;
    updateSelection();
  });
  byId('bulk-delete').addEventListener('click', () => {
    const rows = selectBoxes()
      .filter((b) => b.checked)
      .map((b) => dataOf(b.closest('tr') ?? b));
    if (rows.length === 0 || !window.confirm(`Delete ${rows.length} selected records?`)) return;
    void bulkDelete(rows);
  });
}

function selectBoxes(): HTMLInputElement[] {
  return [...tbody.querySelectorAll<HTMLInputElement>('input.select-row')];
}

function updateSelection() {
  if (!writable) return;
  const boxes = selectBoxes();
  const n = boxes.filter((b) => b.checked).length;
  byId('selected-count').textContent = `${n} selected`;
  byIdAs('bulk-delete', HTMLButtonElement).disabled = n === 0;
  // "Select all" says what the rows say: ticked only when every row shown is (not after a bulk
  // delete redrew the page with fresh, unticked rows), half-ticked for some.
  const all = byIdAs('select-all', HTMLInputElement);
  all.checked = n > 0 && n === boxes.length;
  all.indeterminate = n > 0 && n < boxes.length;
}

const secs = (ms: number) => (ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`);

/** Deletes the rows in batches of BULK_BATCH through POST /records/bulk, showing the progress after each. */
async function bulkDelete(rows: RowData[]) {
  const card = byId('bulk-card');
  const button = byIdAs('bulk-delete', HTMLButtonElement);
  const failures = byId('bulk-failures');
  card.hidden = false;
  card.scrollIntoView({ block: 'nearest' });
  button.disabled = true;
  failures.replaceChildren();
  const total = rows.length;
  const batches = Math.ceil(total / BULK_BATCH);
  const started = performance.now();
  let processed = 0;
  let deleted = 0;
  let failed = 0;
  const draw = (batch: number, state: string) => {
    const elapsed = performance.now() - started;
    const percent = Math.floor((processed / total) * 100);
    byIdAs('bulk-progress', HTMLProgressElement).value = percent;
    byId('bulk-percent').textContent = `${percent} %`;
    byId('bulk-processed').textContent = `${processed} of ${total}`;
    byId('bulk-remaining').textContent = String(total - processed);
    byId('bulk-batch').textContent = batch ? `${batch} of ${batches} (up to ${BULK_BATCH} records each)` : '–';
    byId('bulk-deleted').textContent = String(deleted);
    byId('bulk-failed').textContent = String(failed);
    byId('bulk-elapsed').textContent = secs(elapsed);
    byId('bulk-eta').textContent = processed === 0 ? '–' : processed === total ? '0 s' : secs((elapsed / processed) * (total - processed));
    const s = byId('bulk-state');
    s.textContent = state;
    card.dataset.state = processed === total ? 'done' : 'running';
  };
  const fail = (r: { domain: string; type: string; target: string }, why: string) => {
    failed++;
    failures.append(el('li', { text: `${r.domain} ${r.type} ${r.target}: ${why}` }));
  };
  draw(0, `Deleting ${total} records…`);
  for (let b = 0; b < batches; b++) {
    const chunk = rows.slice(b * BULK_BATCH, (b + 1) * BULK_BATCH);
    draw(b + 1, `Batch ${b + 1} of ${batches}…`);
    const operations = chunk.map((r) => ({ action: 'DELETE', domain: r.name, type: r.type, target: r.rdata }));
    try {
      const res = await api<BulkBody>('/api/dns/records/bulk', { method: 'POST', body: { operations } });
      for (const r of res.results) {
        if (r.ok) deleted++;
        else fail(r, r.message ?? r.reason ?? 'failed');
      }
    } catch (err) {
      for (const r of chunk) fail({ domain: r.name, type: r.type, target: r.rdata }, (err as Error).message);
    }
    processed += chunk.length;
    draw(b + 1, processed === total ? '' : `Batch ${b + 1} of ${batches} done.`);
  }
  draw(batches, `Done: ${deleted} deleted, ${failed} failed.`);
  await reload();
}
