import type { FastifyInstance } from 'fastify';
import formBody from '@fastify/formbody';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { safeString, idParam } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import { normalizeError } from '../../http/errors.js';
import { html, layout, type SafeHtml } from '../../http/html.js';
import { pageErrorHandler, sendPage } from '../../http/page.js';
import { componentParams, incidentParams, pageParams, slugSchema, updateParams } from './statuspage-schemas.js';
import { COMPONENT_STATUSES, IMPACTS, INCIDENT_STATUSES, MAINTENANCE_STATUSES, type ComponentStatus, type EventStatus } from './statuspage-model.js';
import type { StatusPageService } from './statuspage-service.js';
import type { PublicIncident, Summary } from './statuspage-summary.js';

const signedIn: AuthRequirement = { accept: ['session'] };
const hidden = { hide: true } as const;
const LIMIT = { max: 120, timeWindow: '1 minute' };
const csrfField = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`;
const label = (s: string) => s.replace(/_/g, ' ');

const STATUS_LABEL: Record<ComponentStatus, string> = {
  operational: 'Operational',
  degraded_performance: 'Degraded performance',
  partial_outage: 'Partial outage',
  major_outage: 'Major outage',
  under_maintenance: 'Under maintenance',
};

function formatIn(tz: string, isoTime: string | null | undefined) {
  if (!isoTime) return '';
  return new Intl.DateTimeFormat('en-GB', {
    timeZone: tz,
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    timeZoneName: 'short',
  }).format(new Date(isoTime));
}

/** The public status page: the same data as the JSON summary, readable without JavaScript. */
export function renderPublicStatusPage(s: Summary): string {
  const tz = s.page.time_zone;
  const time = (t: string | null | undefined) => (t ? html`<time datetime="${t}">${formatIn(tz, t)}</time>` : '');
  const top = s.components.filter((c) => c.group_id === null);
  const component = (c: Summary['components'][number]): SafeHtml =>
    html`<li class="sp-component" data-component="${c.id}" data-status="${c.status}"><span class="sp-name">${c.name}</span>
      <span class="sp-status">${STATUS_LABEL[c.status]}</span>${c.description ? html`<br><span class="muted">${c.description}</span>` : ''}${
        c.group ? html`<ul class="sp-components">${s.components.filter((x) => x.group_id === c.id).map(component)}</ul>` : ''
      }</li>`;
  const event = (i: PublicIncident) =>
    html`<article class="card sp-incident" id="incident-${i.id}" data-impact="${i.impact}"><h3>${i.name}</h3>
      <p class="muted">${label(i.status)}${i.scheduled_for ? html` · ${time(i.scheduled_for)} – ${time(i.scheduled_until)}` : ''}${
        i.components.length ? html` · affects ${i.components.map((c) => c.name).join(', ')}` : ''
      }</p>
      <ol class="sp-updates">${i.incident_updates.map(
        (u) => html`<li data-update="${u.id}"><strong>${label(u.status)}</strong> — ${u.body} <span class="muted">${time(u.display_at)}</span></li>`,
      )}</ol></article>`;
  const body = html`<div class="card sp-banner" data-indicator="${s.status.indicator}" id="status-indicator"><h1>${s.page.name}</h1>
      <p class="sp-overall">${s.status.description}</p><p class="muted">Updated ${time(s.page.updated_at)} · <a href="/api/statuspage/${s.page.id}">JSON</a></p></div>
    ${s.incidents.length ? html`<section id="incidents"><h2>Incidents</h2>${s.incidents.map(event)}</section>` : ''}
    <div class="card"><h2>Components</h2>${
      top.length ? html`<ul class="sp-components" id="components">${top.map(component)}</ul>` : html`<p class="muted">No components yet.</p>`
    }</div>
    ${s.scheduled_maintenances.length ? html`<section id="maintenances"><h2>Scheduled maintenance</h2>${s.scheduled_maintenances.map(event)}</section>` : ''}`;
  return layout({ title: `${s.page.name} status`, body, user: null });
}

const checkbox = z.literal('on').optional();
const idList = z
  .union([z.string().max(20), z.array(z.string().max(20)).max(200)])
  .optional()
  .transform((v, ctx) => {
    const list = v === undefined ? [] : Array.isArray(v) ? v : [v];
    const ids = list.filter((x) => x !== '').map(Number);
    if (ids.some((n) => !Number.isInteger(n) || n <= 0 || n > 2_147_483_647)) {
      ctx.addIssue({ code: 'custom', message: 'component ids are positive integers' });
      return z.NEVER;
    }
    return ids;
  });
/** `<input type="datetime-local">` (UTC) as an ISO time. */
const localTime = z
  .string()
  .max(40)
  .optional()
  .transform((v, ctx) => {
    if (!v) return undefined;
    const d = new Date(/[zZ]|[+-]\d\d:\d\d$/.test(v) ? v : `${v}Z`);
    if (Number.isNaN(d.getTime())) {
      ctx.addIssue({ code: 'custom', message: 'not a date and time' });
      return z.NEVER;
    }
    return d.toISOString();
  });

const selectOptions = (values: readonly string[], current?: string) =>
  values.map((v) => html`<option value="${v}"${v === current ? html` selected` : ''}>${label(v)}</option>`);

/**
 * The owners' pages: /statuspages (their pages, create one) and /statuspages/{id} (components,
 * incidents and maintenances, draft and published updates, the audit trail), plain forms with the
 * CSRF token that work without JavaScript. Administrators see every page.
 */
export async function statusPageConsole(base: FastifyInstance, pages: StatusPageService) {
  await base.register(formBody);
  base.setErrorHandler((error, request, reply) => pageErrorHandler(request, reply, normalizeError(error, request)));
  const app = base.withTypeProvider<ZodTypeProvider>();
  const opts = { config: { auth: signedIn, rateLimit: LIMIT } };

  app.get('/statuspages', { ...opts, schema: hidden }, async (request, reply) => {
    const user = userOf(request);
    const list = await pages.listPages(user);
    const csrf = reply.generateCsrf();
    const body = html`<div class="card"><h1>Status pages</h1>
      <p class="muted">Public status pages you own${user.isAdmin ? ' (as an administrator you see every page)' : ''}. Each is public at <code>/status/{slug}</code> and <code>/api/statuspage/{slug}</code>.</p>
      ${
        list.length
          ? html`<div class="table-wrap"><table id="statuspage-table"><thead><tr><th>Page</th><th>Slug</th><th>Owner</th><th>Public</th></tr></thead><tbody>${list.map(
              (p) =>
                html`<tr data-page="${p.slug}"><td><a href="/statuspages/${p.id}">${p.name}</a></td><td class="mono">${p.slug}</td><td>${p.owner}</td><td><a href="/status/${p.slug}">/status/${p.slug}</a></td></tr>`,
            )}</tbody></table></div>`
          : html`<p id="no-statuspages">No status page yet.</p>`
      }</div>
      <div class="card"><h2>New status page</h2><form method="post" action="/statuspages" id="create-statuspage">${csrfField(csrf)}
        <label for="sp-name">Name</label><input id="sp-name" name="name" required maxlength="200">
        <label for="sp-slug">Slug</label><input id="sp-slug" name="slug" required maxlength="64" pattern="[a-z0-9][a-z0-9\\-]*[a-z0-9]">
        <label for="sp-tz">Time zone</label><input id="sp-tz" name="time_zone" value="Etc/UTC" maxlength="64">
        <button type="submit">Create</button></form></div>`;
    return sendPage(reply, { title: 'Status pages', user, body });
  });

  app.post(
    '/statuspages',
    {
      ...opts,
      schema: {
        ...hidden,
        body: z.object({
          _csrf: z.string().max(200).optional(),
          slug: slugSchema,
          name: safeString().trim().min(1).max(200),
          time_zone: z.string().max(64).default('Etc/UTC'),
        }),
      },
    },
    async (request, reply) => {
      const { slug, name, time_zone } = request.body;
      const page = await pages.createPage(userOf(request), { slug, name, time_zone: time_zone || 'Etc/UTC' });
      return reply.redirect(`/statuspages/${page.id}`, 303);
    },
  );

  app.get('/statuspages/:id', { ...opts, schema: { ...hidden, params: pageParams } }, async (request, reply) => {
    const user = userOf(request);
    const m = await pages.managedPage(user, request.params.id);
    const csrf = reply.generateCsrf();
    const tz = m.page.time_zone;
    const at = `/statuspages/${m.page.id}`;
    const groups = m.components.filter((c) => c.group);
    const nameOf = (id: number | null) => m.components.find((c) => c.id === id)?.name ?? '';
    const components = html`<div class="card" id="components"><h2>Components</h2>${
      m.components.length
        ? html`<div class="table-wrap"><table><thead><tr><th>Component</th><th>Group</th><th>Status</th></tr></thead><tbody>${m.components.map(
            (c) =>
              html`<tr data-component="${c.id}"><td>${c.name}${c.group ? html` <span class="badge">group</span>` : ''}</td><td>${nameOf(c.group_id)}</td><td>${
                c.group
                  ? html`<span class="muted">worst of its components</span>`
                  : html`<form class="inline" method="post" action="${at}/components/${c.id}">${csrfField(csrf)}<select name="status" aria-label="Status of ${c.name}">${selectOptions(
                      COMPONENT_STATUSES,
                      c.status,
                    )}</select><button type="submit">Set</button></form>`
              }</td></tr>`,
          )}</tbody></table></div>`
        : html`<p class="muted">No components yet.</p>`
    }
      <form method="post" action="${at}/components" id="add-component">${csrfField(csrf)}
        <label for="c-name">Name</label><input id="c-name" name="name" required maxlength="200">
        <label for="c-group">In group</label><select id="c-group" name="group_id"><option value="">(none)</option>${groups.map(
          (g) => html`<option value="${g.id}">${g.name}</option>`,
        )}</select>
        <label><input type="checkbox" name="group"> This is a group</label>
        <button type="submit">Add component</button></form></div>`;

    const updateForm = (i: (typeof m.incidents)[number]) =>
      html`<form method="post" action="${at}/incidents/${i.id}/updates" class="add-update">${csrfField(csrf)}
        <label for="u-status-${i.id}">Status</label><select id="u-status-${i.id}" name="status">${selectOptions(
          i.kind === 'incident' ? INCIDENT_STATUSES : MAINTENANCE_STATUSES,
          i.status,
        )}</select>
        <label for="u-body-${i.id}">Update</label><textarea id="u-body-${i.id}" name="body" required maxlength="10000" rows="2"></textarea>
        <label><input type="checkbox" name="publish"> Publish now (otherwise a draft)</label>
        <button type="submit">Add update</button></form>`;
    const incidents = html`<div class="card" id="incidents"><h2>Incidents and maintenance</h2>${m.incidents.map(
      (
        i,
      ) => html`<article class="sp-incident" data-incident="${i.id}"><h3>${i.name} <span class="badge">${i.kind}</span> <span class="badge">${label(i.status)}</span></h3>
        <p class="muted">Impact ${i.impact}${i.scheduled_for ? ` · ${formatIn(tz, i.scheduled_for)} – ${formatIn(tz, i.scheduled_until)}` : ''}${
          i.component_ids.length ? ` · ${i.component_ids.map(nameOf).join(', ')}` : ''
        }</p>
        ${i.internal_notes ? html`<p class="internal-notes"><strong>Internal notes</strong> (never public): ${i.internal_notes}</p>` : ''}
        <ol class="sp-updates">${i.updates.map(
          (u) => html`<li data-update="${u.id}" data-state="${u.state}"><strong>${label(u.status)}</strong> — ${u.body}
            <span class="badge">${u.state}</span>${
              u.state === 'draft'
                ? html` <form class="inline" method="post" action="${at}/incidents/${i.id}/updates/${u.id}/publish">${csrfField(csrf)}<button type="submit">Publish</button></form>`
                : html` <span class="muted">${formatIn(tz, u.published_at)}</span>`
            }</li>`,
        )}</ol>${updateForm(i)}</article>`,
    )}
      <h3>New incident or maintenance</h3>
      <form method="post" action="${at}/incidents" id="add-incident">${csrfField(csrf)}
        <label for="i-kind">Kind</label><select id="i-kind" name="kind"><option value="incident">incident</option><option value="maintenance">maintenance</option></select>
        <label for="i-name">Name</label><input id="i-name" name="name" required maxlength="200">
        <label for="i-impact">Impact</label><select id="i-impact" name="impact"><option value="">(default)</option>${selectOptions(IMPACTS)}</select>
        <fieldset><legend>Affected components</legend>${m.components
          .filter((c) => !c.group)
          .map((c) => html`<label><input type="checkbox" name="component_ids" value="${c.id}"> ${c.name}</label>`)}</fieldset>
        <label for="i-from">Maintenance from (UTC)</label><input id="i-from" type="datetime-local" name="scheduled_for">
        <label for="i-until">Maintenance until (UTC)</label><input id="i-until" type="datetime-local" name="scheduled_until">
        <label for="i-notes">Internal notes (never public)</label><textarea id="i-notes" name="internal_notes" maxlength="10000" rows="2"></textarea>
        <label for="i-update">First update</label><textarea id="i-update" name="update" maxlength="10000" rows="2"></textarea>
        <label><input type="checkbox" name="publish"> Publish the first update now</label>
        <button type="submit">Create</button></form></div>`;

    const audit = html`<div class="card" id="audit"><h2>Audit trail</h2>${
      m.audit.length
        ? html`<div class="table-wrap"><table><thead><tr><th>When</th><th>Who</th><th>Action</th><th>Target</th></tr></thead><tbody>${m.audit.map(
            (a) => html`<tr><td>${formatIn(tz, a.at)}</td><td>${a.actor}</td><td class="mono">${a.action}</td><td class="mono">${a.target ?? ''}</td></tr>`,
          )}</tbody></table></div>`
        : html`<p class="muted">Nothing yet.</p>`
    }</div>`;

    const body = html`<div class="card"><h1>${m.page.name}</h1><p class="muted">Owner ${m.page.owner} · time zone ${tz} · public at <a href="/status/${m.page.slug}">/status/${m.page.slug}</a>
      and <a href="/api/statuspage/${m.page.slug}">/api/statuspage/${m.page.slug}</a> · <a href="/statuspages">all status pages</a></p></div>
      ${components}${incidents}${audit}`;
    return sendPage(reply, { title: m.page.name, user, body });
  });

  app.post(
    '/statuspages/:id/components',
    {
      ...opts,
      schema: {
        ...hidden,
        params: pageParams,
        body: z.object({
          _csrf: z.string().max(200).optional(),
          name: safeString().trim().min(1).max(200),
          group_id: z.union([z.literal(''), idParam()]).optional(),
          group: checkbox,
        }),
      },
    },
    async (request, reply) => {
      const { name, group_id, group } = request.body;
      await pages.addComponent(userOf(request), request.params.id, { name, group: group === 'on', group_id: group_id === '' ? null : group_id });
      return reply.redirect(`/statuspages/${request.params.id}#components`, 303);
    },
  );

  app.post(
    '/statuspages/:id/components/:componentId',
    { ...opts, schema: { ...hidden, params: componentParams, body: z.object({ _csrf: z.string().max(200).optional(), status: z.enum(COMPONENT_STATUSES) }) } },
    async (request, reply) => {
      await pages.updateComponent(userOf(request), request.params.id, request.params.componentId, { status: request.body.status });
      return reply.redirect(`/statuspages/${request.params.id}#components`, 303);
    },
  );

  app.post(
    '/statuspages/:id/incidents',
    {
      ...opts,
      schema: {
        ...hidden,
        params: pageParams,
        body: z.object({
          _csrf: z.string().max(200).optional(),
          kind: z.enum(['incident', 'maintenance']).default('incident'),
          name: safeString().trim().min(1).max(200),
          impact: z.union([z.literal(''), z.enum(IMPACTS)]).optional(),
          component_ids: idList,
          scheduled_for: localTime,
          scheduled_until: localTime,
          internal_notes: safeString({ multiline: true }).max(10_000).optional(),
          update: safeString({ multiline: true }).max(10_000).optional(),
          publish: checkbox,
        }),
      },
    },
    async (request, reply) => {
      const b = request.body;
      const update = b.update?.trim();
      await pages.createIncident(userOf(request), request.params.id, {
        kind: b.kind,
        name: b.name,
        impact: b.impact || undefined,
        component_ids: b.component_ids,
        scheduled_for: b.scheduled_for,
        scheduled_until: b.scheduled_until,
        internal_notes: b.internal_notes,
        update: update ? { body: update, publish: b.publish === 'on' } : undefined,
      });
      return reply.redirect(`/statuspages/${request.params.id}#incidents`, 303);
    },
  );

  app.post(
    '/statuspages/:id/incidents/:incidentId/updates',
    {
      ...opts,
      schema: {
        ...hidden,
        params: incidentParams,
        body: z.object({
          _csrf: z.string().max(200).optional(),
          status: z.enum([...INCIDENT_STATUSES, ...MAINTENANCE_STATUSES] as [EventStatus, ...EventStatus[]]).optional(),
          body: safeString({ multiline: true }).trim().min(1).max(10_000),
          publish: checkbox,
        }),
      },
    },
    async (request, reply) => {
      const { status, body, publish } = request.body;
      await pages.addUpdate(userOf(request), request.params.id, request.params.incidentId, { status, body, publish: publish === 'on' });
      return reply.redirect(`/statuspages/${request.params.id}#incidents`, 303);
    },
  );

  app.post(
    '/statuspages/:id/incidents/:incidentId/updates/:updateId/publish',
    { ...opts, schema: { ...hidden, params: updateParams, body: z.object({ _csrf: z.string().max(200).optional() }).optional() } },
    async (request, reply) => {
      await pages.publishUpdate(userOf(request), request.params.id, request.params.incidentId, request.params.updateId);
      return reply.redirect(`/statuspages/${request.params.id}#incidents`, 303);
    },
  );
}
