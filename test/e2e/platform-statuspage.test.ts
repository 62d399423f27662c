import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserLogin, createJwtUser, createTestApp, extractCsrf, type TestApp, type TestUser } from '../support/harness.js';

/**
 * Status pages: the management API (owner or administrator), the public summary.json-shaped JSON
 * and HTML page with their ETag and 304, the no-JS owner pages with CSRF, and that internal notes,
 * draft updates and the audit trail never reach the public.
 */
let t: TestApp;
let owner: TestUser;
let stranger: TestUser;
let root: TestUser;

beforeAll(async () => {
  t = await createTestApp({ env: { PUBLIC_BASE_URL: 'https://status.example.test' } });
  owner = await createJwtUser(t, []);
  stranger = await createJwtUser(t, []);
  root = await createJwtUser(t, [], { isAdmin: true });
}, 60_000);
afterAll(async () => t?.close());

const api = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, who: TestUser | null, payload?: unknown) =>
  t.app.inject({ method, url, headers: who ? who.auth : {}, ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}) });

const SECRET_NOTE = 'root cause: the intern dropped table customers';
const DRAFT_TEXT = 'DRAFT: we suspect the storage vendor, do not publish yet';

describe('status pages', () => {
  let pageId: number;
  let group: number;
  let api1: number;
  let web: number;
  let incidentId: number;

  it('an owner creates a page, a component group and components; slugs and groups are validated', async () => {
    const created = await api('POST', '/api/statuspages', owner, { slug: 'acme', name: 'Acme Cloud', time_zone: 'Europe/Stockholm' });
    expect(created.statusCode, created.body).toBe(201);
    pageId = created.json().page.id;
    expect(created.json().page).toMatchObject({ slug: 'acme', public_url: 'https://status.example.test/status/acme', owner: owner.name });

    const taken = await api('POST', '/api/statuspages', stranger, { slug: 'acme', name: 'Other' });
    expect(taken.statusCode).toBe(422);
    expect(taken.json()).toMatchObject({ ok: false, reason: 'validation_failed', errors: { slug: [expect.stringMatching(/taken/)] } });
    const badTz = await api('POST', '/api/statuspages', owner, { slug: 'tz-page', name: 'x', time_zone: 'Mars/Olympus' });
    expect(badTz.json().errors).toHaveProperty('time_zone');
    expect((await api('POST', '/api/statuspages', owner, { slug: 'Bad Slug!', name: 'x' })).statusCode).toBe(422);

    group = (await api('POST', `/api/statuspages/${pageId}/components`, owner, { name: 'Core', group: true })).json().component.id;
    const a = await api('POST', `/api/statuspages/${pageId}/components`, owner, { name: 'API', group_id: group });
    expect(a.statusCode, a.body).toBe(201);
    api1 = a.json().component.id;
    web = (await api('POST', `/api/statuspages/${pageId}/components`, owner, { name: 'Website', description: 'www' })).json().component.id;
    // A component cannot join a non-group, a group cannot nest.
    expect((await api('POST', `/api/statuspages/${pageId}/components`, owner, { name: 'x', group_id: web })).json().errors).toHaveProperty('group_id');
    expect((await api('POST', `/api/statuspages/${pageId}/components`, owner, { name: 'x', group: true, group_id: group })).statusCode).toBe(422);
    // A group id beyond PostgreSQL's integer is a 422, not a 500.
    expect((await api('POST', `/api/statuspages/${pageId}/components`, owner, { name: 'x', group_id: 2147483649 })).json().errors).toHaveProperty('group_id');
  });

  it('other users get 404 on the management API; administrators see and manage every page', async () => {
    expect((await api('GET', `/api/statuspages/${pageId}`, stranger)).statusCode).toBe(404);
    expect((await api('PATCH', `/api/statuspages/${pageId}/components/${web}`, stranger, { status: 'major_outage' })).statusCode).toBe(404);
    expect((await api('GET', '/api/statuspages', stranger)).json().pages).toEqual([]);
    expect((await api('GET', '/api/statuspages', root)).json().pages.map((p: { slug: string }) => p.slug)).toContain('acme');
    expect((await api('GET', `/api/statuspages/${pageId}`, root)).statusCode).toBe(200);
    expect((await api('GET', '/api/statuspages', null)).statusCode).toBe(401);
    expect((await api('PATCH', `/api/statuspages/${pageId}`, stranger, { name: 'Mine now' })).statusCode).toBe(404);
    const renamed = await api('PATCH', `/api/statuspages/${pageId}`, owner, { name: 'Acme Cloud', time_zone: 'Europe/Stockholm' });
    expect(renamed.json().page).toMatchObject({ slug: 'acme', name: 'Acme Cloud', time_zone: 'Europe/Stockholm' });
    expect((await api('PATCH', `/api/statuspages/${pageId}`, owner, { time_zone: 'Nowhere/Else' })).statusCode).toBe(422);
  });

  it('the public JSON has the summary.json shape; an incident appears only once an update is published; notes and drafts never', async () => {
    const before = await api('GET', '/api/statuspage/acme', null);
    expect(before.statusCode).toBe(200);
    expect(before.json()).toMatchObject({
      page: { id: 'acme', name: 'Acme Cloud', url: 'https://status.example.test/status/acme', time_zone: 'Europe/Stockholm' },
      status: { indicator: 'none', description: 'All Systems Operational' },
      incidents: [],
      scheduled_maintenances: [],
    });
    expect(before.json().components).toEqual([
      expect.objectContaining({ id: String(group), name: 'Core', group: true, group_id: null, components: [String(api1)], status: 'operational' }),
      expect.objectContaining({ id: String(api1), name: 'API', group: false, group_id: String(group), status: 'operational' }),
      expect.objectContaining({ id: String(web), name: 'Website', description: 'www', status: 'operational' }),
    ]);

    const inc = await api('POST', `/api/statuspages/${pageId}/incidents`, owner, {
      name: 'API errors',
      impact: 'major',
      component_ids: [api1],
      internal_notes: SECRET_NOTE,
      update: { body: DRAFT_TEXT },
    });
    expect(inc.statusCode, inc.body).toBe(201);
    incidentId = inc.json().incident.id;
    expect(inc.json().incident).toMatchObject({ status: 'investigating', internal_notes: SECRET_NOTE, updates: [{ state: 'draft', body: DRAFT_TEXT }] });
    const draftOnly = await api('GET', '/api/statuspage/acme', null);
    expect(draftOnly.json().incidents).toEqual([]);
    expect(draftOnly.body).not.toContain(DRAFT_TEXT);

    const published = await api('POST', `/api/statuspages/${pageId}/incidents/${incidentId}/updates`, owner, {
      status: 'identified',
      body: 'Elevated error rates on the API; a fix is being deployed.',
      publish: true,
    });
    expect(published.statusCode, published.body).toBe(201);
    await api('PATCH', `/api/statuspages/${pageId}/components/${api1}`, owner, { status: 'partial_outage' });

    const after = await api('GET', '/api/statuspage/acme', null);
    const s = after.json();
    expect(s.status).toEqual({ indicator: 'major', description: 'Partial System Outage' });
    expect(s.incidents).toHaveLength(1);
    expect(s.incidents[0]).toMatchObject({
      id: String(incidentId),
      name: 'API errors',
      status: 'identified',
      impact: 'major',
      shortlink: `https://status.example.test/status/acme#incident-${incidentId}`,
      resolved_at: null,
      components: [{ id: String(api1), name: 'API', status: 'partial_outage' }],
      incident_updates: [expect.objectContaining({ status: 'identified', body: 'Elevated error rates on the API; a fix is being deployed.' })],
    });
    expect(s.components.find((c: { id: string }) => c.id === String(group)).status).toBe('partial_outage');
    // Nothing private: notes, the draft, audit data.
    for (const res of [after, await t.app.inject({ method: 'GET', url: '/status/acme' })]) {
      expect(res.body).not.toContain(SECRET_NOTE);
      expect(res.body).not.toContain(DRAFT_TEXT);
      expect(res.body).not.toMatch(/internal_notes|audit|page\.create|component\.status/);
      expect(res.body).not.toContain(owner.name);
    }
    expect(Object.keys(s.incidents[0]).sort()).not.toContain('internal_notes');
  });

  it('publishing the draft and a resolving update; a scheduled maintenance shows once published', async () => {
    const detail = (await api('GET', `/api/statuspages/${pageId}`, owner)).json();
    const draft = detail.incidents[0].updates.find((u: { state: string }) => u.state === 'draft');
    const pub = await api('POST', `/api/statuspages/${pageId}/incidents/${incidentId}/updates/${draft.id}/publish`, owner);
    expect(pub.statusCode, pub.body).toBe(200);
    expect(pub.json().update).toMatchObject({ state: 'published' });
    expect((await api('POST', `/api/statuspages/${pageId}/incidents/${incidentId}/updates/${draft.id}/publish`, owner)).statusCode).toBe(409);
    const nowPublic = (await api('GET', '/api/statuspage/acme', null)).json();
    expect(nowPublic.incidents[0].incident_updates.map((u: { body: string }) => u.body)).toContain(DRAFT_TEXT);
    // Publishing a draft moves the incident to the draft's status (investigating).
    expect(nowPublic.incidents[0].status).toBe('investigating');

    // A status that does not belong to incidents is refused.
    expect((await api('POST', `/api/statuspages/${pageId}/incidents/${incidentId}/updates`, owner, { status: 'scheduled', body: 'x' })).statusCode).toBe(422);
    await api('POST', `/api/statuspages/${pageId}/incidents/${incidentId}/updates`, owner, { status: 'resolved', body: 'Fixed.', publish: true });
    await api('PATCH', `/api/statuspages/${pageId}/components/${api1}`, owner, { status: 'operational' });

    const from = new Date(Date.now() + 86_400_000).toISOString();
    const until = new Date(Date.now() + 90_000_000).toISOString();
    expect((await api('POST', `/api/statuspages/${pageId}/incidents`, owner, { kind: 'maintenance', name: 'x' })).json().errors).toHaveProperty(
      'scheduled_for',
    );
    const m = await api('POST', `/api/statuspages/${pageId}/incidents`, owner, {
      kind: 'maintenance',
      name: 'Database upgrade',
      component_ids: [web],
      scheduled_for: from,
      scheduled_until: until,
      update: { body: 'PostgreSQL upgrade; the website is read-only meanwhile.', publish: true },
    });
    expect(m.statusCode, m.body).toBe(201);
    const s = (await api('GET', '/api/statuspage/acme', null)).json();
    expect(s.incidents).toEqual([]);
    expect(s.status.indicator).toBe('none');
    expect(s.scheduled_maintenances).toEqual([
      expect.objectContaining({ name: 'Database upgrade', status: 'scheduled', impact: 'maintenance', scheduled_for: from, scheduled_until: until }),
    ]);
    // In progress: the page says so.
    await api('POST', `/api/statuspages/${pageId}/incidents/${m.json().incident.id}/updates`, owner, {
      status: 'in_progress',
      body: 'Started.',
      publish: true,
    });
    expect((await api('GET', '/api/statuspage/acme', null)).json().status).toEqual({ indicator: 'maintenance', description: 'Service Under Maintenance' });
  });

  it('JSON and HTML carry Cache-Control and a strong ETag; If-None-Match answers 304 until something changes', async () => {
    for (const url of ['/api/statuspage/acme', '/status/acme']) {
      const first = await t.app.inject({ method: 'GET', url });
      expect(first.statusCode).toBe(200);
      expect(first.headers['cache-control']).toBe('public, max-age=30, must-revalidate');
      const etag = String(first.headers.etag);
      expect(etag).toMatch(/^"[^"]+"$/); // strong: no W/ prefix
      const again = await t.app.inject({ method: 'GET', url, headers: { 'if-none-match': etag } });
      expect(again.statusCode, url).toBe(304);
      expect(again.body).toBe('');
      expect((await t.app.inject({ method: 'GET', url, headers: { 'if-none-match': '"other"' } })).statusCode).toBe(200);
      // A list of tags (as caches send) and weak comparison, as RFC 9110 reads If-None-Match.
      expect((await t.app.inject({ method: 'GET', url, headers: { 'if-none-match': `"other", W/${etag}` } })).statusCode).toBe(304);
      expect((await t.app.inject({ method: 'GET', url, headers: { 'if-none-match': '*' } })).statusCode).toBe(304);
      await api('PATCH', `/api/statuspages/${pageId}/components/${web}`, owner, { status: 'degraded_performance' });
      const changed = await t.app.inject({ method: 'GET', url, headers: { 'if-none-match': etag } });
      expect(changed.statusCode).toBe(200);
      expect(changed.headers.etag).not.toBe(etag);
      await api('PATCH', `/api/statuspages/${pageId}/components/${web}`, owner, { status: 'operational' });
    }
    const html = (await t.app.inject({ method: 'GET', url: '/status/acme' })).body;
    expect(html).toContain('Acme Cloud');
    expect(html).toContain('Database upgrade');
    expect(html).not.toContain('<script');
    const missing = await t.app.inject({ method: 'GET', url: '/api/statuspage/nope', headers: { 'if-none-match': '*' } });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ ok: false, reason: 'not_found' });
    expect((await t.app.inject({ method: 'GET', url: '/status/nope', headers: { accept: 'text/html' } })).statusCode).toBe(404);
  });

  it('every management action is audited (API), internal-note text stays out of the audit detail', async () => {
    const audit = (await api('GET', `/api/statuspages/${pageId}/audit`, owner)).json().audit as Array<{ action: string; actor: string; detail: unknown }>;
    const actions = audit.map((a) => a.action);
    for (const a of [
      'page.create',
      'page.update',
      'group.create',
      'component.create',
      'incident.create',
      'update.draft',
      'update.publish',
      'component.status',
      'maintenance.create',
    ])
      expect(actions).toContain(a);
    expect(audit.every((a) => a.actor === owner.name)).toBe(true);
    expect(JSON.stringify(audit)).not.toContain(SECRET_NOTE);
    await api('PATCH', `/api/statuspages/${pageId}/incidents/${incidentId}`, root, { internal_notes: 'more secrets' });
    const latest = (await api('GET', `/api/statuspages/${pageId}/audit`, owner)).json().audit[0];
    expect(latest).toMatchObject({ actor: root.name, action: 'incident.update', detail: { internal_notes: 'changed' } });
  });

  it('the owner pages work without JavaScript and need the CSRF token', async () => {
    const { jar } = await browserLogin(t.app, owner.name, owner.password);
    const list = await t.app.inject({ method: 'GET', url: '/statuspages', headers: { cookie: jar.header() } });
    expect(list.statusCode).toBe(200);
    expect(list.body).toContain('Acme Cloud');
    const csrf = extractCsrf(list.body);
    const form = (url: string, fields: Record<string, string>) =>
      t.app.inject({
        method: 'POST',
        url,
        headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams(fields).toString(),
      });
    expect((await form('/statuspages', { slug: 'forms', name: 'Forms page' })).statusCode).toBe(403); // no CSRF token
    const created = await form('/statuspages', { _csrf: csrf, slug: 'forms', name: 'Forms page', time_zone: 'Etc/UTC' });
    expect(created.statusCode, created.body).toBe(303);
    const at = String(created.headers.location);
    expect(at).toMatch(/^\/statuspages\/\d+$/);
    expect((await form(`${at}/components`, { _csrf: csrf, name: 'Mail' })).statusCode).toBe(303);
    const manage = await t.app.inject({ method: 'GET', url: at, headers: { cookie: jar.header() } });
    const componentId = /data-component="(\d+)"/.exec(manage.body)![1];
    expect((await form(`${at}/components/${componentId}`, { _csrf: csrf, status: 'major_outage' })).statusCode).toBe(303);
    expect(
      (
        await form(`${at}/incidents`, {
          _csrf: csrf,
          kind: 'incident',
          name: 'Mail down',
          component_ids: componentId!,
          internal_notes: SECRET_NOTE,
          update: 'Looking into it.',
        })
      ).statusCode,
    ).toBe(303);
    const withDraft = await t.app.inject({ method: 'GET', url: at, headers: { cookie: jar.header() } });
    expect(withDraft.body).toContain(SECRET_NOTE);
    const publish = /action="([^"]+\/publish)"/.exec(withDraft.body)![1]!;
    expect((await t.app.inject({ method: 'GET', url: '/api/statuspage/forms' })).json().incidents).toEqual([]);
    expect((await form(publish, { _csrf: csrf })).statusCode).toBe(303);
    const pub = (await t.app.inject({ method: 'GET', url: '/api/statuspage/forms' })).json();
    expect(pub.status.indicator).toBe('critical');
    expect(pub.incidents[0].incident_updates[0].body).toBe('Looking into it.');
    // A form error is a page, not JSON.
    const bad = await form(`${at}/incidents`, { _csrf: csrf, kind: 'maintenance', name: 'No window' });
    expect(bad.statusCode).toBe(422);
    expect(bad.headers['content-type']).toMatch(/text\/html/);
    // Another user's page is not found.
    const other = await browserLogin(t.app, stranger.name, stranger.password);
    expect((await t.app.inject({ method: 'GET', url: at, headers: { cookie: other.jar.header() } })).statusCode).toBe(404);
  });
});
