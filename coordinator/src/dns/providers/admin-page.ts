/**
 * `/admin/dns-providers` (administrators): the provider zones (mapping rows, the imported older
 * host-side config, NS-detected zones) with their token references, whether each is usable, a form
 * to add or replace a mapping, "Save as mapping" for an imported or detected zone (keeping it
 * imported needs nothing), and Remove for a mapping row. Server-rendered, works without JavaScript.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formBody from '@fastify/formbody';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import type { DnsDeps } from '../../deps.js';
import { normalizeError } from '../../http/errors.js';
import { html } from '../../http/html.js';
import { pageErrorHandler, sendPage } from '../../http/page.js';
import { ZoneRegistry } from '../zone-registry.js';
import { ProviderDirectory } from './directory.js';
import { resolveTokenRef } from './token-ref.js';
import { PROVIDERS } from './types.js';

const admin: AuthRequirement = { accept: ['session'], adminOnly: true };
const hidden = { hide: true } as const;
const csrfField = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`;

interface Row {
  zone: string;
  provider: string;
  providerZoneId: string;
  tokenRef: string;
  source: 'mapping' | 'imported' | 'detected';
  origin?: string;
  ready: boolean;
  problem?: string;
}

export async function dnsProvidersPage(base: FastifyInstance, deps: Pick<DnsDeps, 'config' | 'orm'>) {
  await base.register(formBody);
  const app = base.withTypeProvider<ZodTypeProvider>();
  const zones = new ZoneRegistry(deps.orm);
  const dir = new ProviderDirectory(zones, deps.config);
  app.setErrorHandler((error, request, reply) => pageErrorHandler(request, reply, normalizeError(error, request)));

  async function rows(): Promise<Row[]> {
    const [mappings, legacy] = await Promise.all([dir.listMappings(), dir.importLegacy()]);
    const out: Row[] = [];
    for (const m of mappings) {
      const t = await resolveTokenRef(m.tokenRef);
      out.push({
        zone: m.zone,
        provider: m.provider,
        providerZoneId: m.providerZoneId,
        tokenRef: m.tokenRef,
        source: 'mapping',
        ready: !('problem' in t),
        ...('problem' in t ? { problem: t.problem } : {}),
      });
    }
    for (const l of legacy) {
      if (out.some((r) => r.zone === l.zone)) continue;
      const t = await resolveTokenRef(l.tokenRef);
      out.push({
        zone: l.zone,
        provider: 'cloudflare',
        providerZoneId: l.providerZoneId,
        tokenRef: l.tokenRef,
        source: 'imported',
        origin: l.origin,
        ready: !('problem' in t),
      });
    }
    for (const z of await zones.list()) {
      if (z.filePath === null) continue;
      const b = await dir.binding(z);
      if (b?.source === 'detected')
        out.push({
          zone: z.zone,
          provider: b.provider,
          providerZoneId: b.providerZoneId ?? '',
          tokenRef: b.tokenRef,
          source: 'detected',
          ready: b.ready,
          ...(b.problem ? { problem: b.problem } : {}),
        });
    }
    return out.sort((a, b) => a.zone.localeCompare(b.zone));
  }

  async function page(
    request: FastifyRequest,
    reply: FastifyReply,
    status = 200,
    opts: { error?: string; notice?: string; form?: Record<string, string> } = {},
  ) {
    const user = userOf(request);
    const csrf = reply.generateCsrf();
    const list = await rows();
    const f = opts.form ?? {};
    const body = html`${opts.notice ? html`<div class="card notice" role="status" id="notice"><p>${opts.notice}</p></div>` : ''}<div class="card"><h1>DNS provider zones</h1>
      <p class="muted">Zones whose records live at an external DNS provider. Their reads and writes go through the provider's API; <code>/axfr</code> refreshes them from it. A mapping row stores a <em>reference</em> to the API token (an environment variable or a file on this server), never the token. Zones from the older host-side config (<code>DNS_PROVIDER_LEGACY_FILE</code>) are used as they are until saved as a mapping; zones whose name servers are all the provider's are detected without a row. Also: <code>npm run cli -- dns:providers:list</code>.</p>
      ${
        list.length
          ? html`<div class="table-wrap"><table id="provider-table"><thead><tr><th>Zone</th><th>Provider</th><th>Zone id</th><th>Token reference</th><th>Source</th><th>Usable</th><th></th></tr></thead><tbody>${list.map(
              (
                r,
              ) => html`<tr data-zone="${r.zone}" data-source="${r.source}"><td class="mono">${r.zone}</td><td>${PROVIDERS.cloudflare.label}</td><td class="mono">${r.providerZoneId || '—'}</td>
                <td class="mono">${r.tokenRef}</td><td>${r.source === 'imported' ? `imported (${r.origin ?? ''})` : r.source}</td>
                <td>${r.ready ? html`<span class="badge on" data-ready="true">yes</span>` : html`<span class="badge bad" data-ready="false">no</span>${r.problem ? html`<br><span class="muted">${r.problem}</span>` : ''}`}</td>
                <td>${
                  r.source === 'mapping'
                    ? html`<form method="post" action="/admin/dns-providers/remove" data-confirm="Remove the provider mapping of ${r.zone}?">${csrfField(csrf)}<input type="hidden" name="zone" value="${r.zone}"><button class="danger" type="submit">Remove</button></form>`
                    : r.providerZoneId
                      ? html`<form method="post" action="/admin/dns-providers">${csrfField(csrf)}<input type="hidden" name="zone" value="${r.zone}"><input type="hidden" name="provider_zone_id" value="${r.providerZoneId}"><input type="hidden" name="token_ref" value="${r.tokenRef}"><button type="submit">Save as mapping</button></form>`
                      : ''
                }</td></tr>`,
            )}</tbody></table></div>`
          : html`<p id="no-providers">No provider zone.</p>`
      }</div>
      <div class="card" id="add-provider"><h2>Add or replace a mapping</h2>
        ${opts.error ? html`<p class="error" role="alert" id="provider-error">${opts.error}</p>` : ''}
        <form method="post" action="/admin/dns-providers">${csrfField(csrf)}
          <label for="zone">Zone</label><input id="zone" name="zone" required maxlength="253" value="${f.zone ?? ''}">
          <label for="provider">Provider</label><select id="provider" name="provider"><option value="cloudflare">${PROVIDERS.cloudflare.label}</option></select>
          <label for="provider_zone_id">Zone id at the provider (empty: looked up by name with the token)</label><input id="provider_zone_id" name="provider_zone_id" maxlength="64" value="${f.provider_zone_id ?? ''}">
          <label for="token_ref">Token reference (env:NAME, file:/path or file:/path#KEY)</label><input id="token_ref" name="token_ref" required maxlength="1100" value="${f.token_ref ?? ''}">
          <button type="submit">Save</button></form></div>`;
    return sendPage(reply.code(status), { title: 'DNS provider zones', user, active: 'admin', body });
  }

  app.get(
    '/admin/dns-providers',
    {
      schema: { ...hidden, querystring: z.object({ saved: z.string().max(253).optional(), removed: z.string().max(253).optional() }) },
      config: { auth: admin },
    },
    (request, reply) =>
      page(request, reply, 200, {
        ...(request.query.saved ? { notice: `Mapping of ${request.query.saved} saved.` } : {}),
        ...(request.query.removed ? { notice: `Mapping of ${request.query.removed} removed.` } : {}),
      }),
  );

  app.post(
    '/admin/dns-providers',
    {
      schema: {
        ...hidden,
        body: z.object({
          _csrf: z.string().max(200).optional(),
          zone: z.string().max(253),
          provider: z.string().max(32).default('cloudflare'),
          provider_zone_id: z.string().max(64).default(''),
          token_ref: z.string().max(1100),
        }),
      },
      config: { auth: admin },
    },
    async (request, reply) => {
      const b = request.body;
      try {
        const m = await dir.saveMapping({
          zone: b.zone,
          provider: b.provider,
          tokenRef: b.token_ref,
          ...(b.provider_zone_id.trim() ? { providerZoneId: b.provider_zone_id } : {}),
        });
        request.log.info({ zone: m.zone, provider: m.provider, by: userOf(request).username }, 'DNS provider mapping saved from the admin page');
        return await reply.redirect(`/admin/dns-providers?saved=${encodeURIComponent(m.zone)}`, 303);
      } catch (err) {
        const e = normalizeError(err, request);
        if (e.status < 500 || e.reason === 'service_unavailable')
          return page(request, reply, e.status === 503 ? 503 : 422, {
            error: e.message,
            form: { zone: b.zone, provider_zone_id: b.provider_zone_id, token_ref: b.token_ref },
          });
        throw err;
      }
    },
  );

  app.post(
    '/admin/dns-providers/remove',
    { schema: { ...hidden, body: z.object({ _csrf: z.string().max(200).optional(), zone: z.string().max(253) }) }, config: { auth: admin } },
    async (request, reply) => {
      if (!(await dir.removeMapping(request.body.zone))) return page(request, reply, 422, { error: `${request.body.zone} has no provider mapping.` });
      request.log.info({ zone: request.body.zone, by: userOf(request).username }, 'DNS provider mapping removed from the admin page');
      return reply.redirect(`/admin/dns-providers?removed=${encodeURIComponent(request.body.zone)}`, 303);
    },
  );
}
