import type { FastifyInstance, FastifyRequest } from 'fastify';
import formBody from '@fastify/formbody';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { formatStockholm } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement, Principal } from '../accounts/types.js';
import { hasPermission } from '../accounts/types.js';
import type { DomainDeps } from '../deps.js';
import { canRead, canWrite, zoneAccess } from '../dns/access.js';
import { ZoneRegistry } from '../dns/zone-registry.js';
import { normalizeError, validationFailed } from '../http/errors.js';
import { breakAtDots, html, plural } from '../http/html.js';
import { pageErrorHandler, sendPage } from '../http/page.js';
import { DEFAULT_IRC_SOURCE } from '../irc/event-store.js';
import { dbOf } from '../db/sql.js';
import { archiveSize, currentJobs } from './console-repository.js';
import { presentJob } from '../speech/jobs/presenter.js';
import { LocalModelSettings } from '../speech/local-models.js';
import { targetIncompatibility } from '../speech/workers/compatibility.js';

const signedIn: AuthRequirement = { accept: ['session'] };
const admin: AuthRequirement = { accept: ['session'], adminOnly: true };
const hidden = { hide: true } as const;
const csrfField = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`;

/**
 * The console's own pages: the home dashboard `/` and the administration pages (`/admin`,
 * `/admin/workers`, the local model allowlist); the DNS editor under `/dns` is the dns plugin's
 * (dns/pages.ts), the chat-log reader under `/irc` the irc plugin's. Everything reads without
 * JavaScript; the admin forms post without it.
 */
export async function consolePlugin(base: FastifyInstance, deps: DomainDeps) {
  await base.register(formBody);
  const app = base.withTypeProvider<ZodTypeProvider>();
  const zones = new ZoneRegistry(deps.orm);
  const localModels = new LocalModelSettings(deps.orm, deps.config.SPEECH_LOCAL_MODELS);
  app.setErrorHandler((error, request, reply) => pageErrorHandler(request, reply, normalizeError(error, request)));

  const readableZones = async (request: FastifyRequest) => {
    const access = await zoneAccess(request.principal as Principal, deps.accounts, deps.config.DNS_WHITELIST_WRITE);
    return (await zones.list()).filter((z) => canRead(access, z.zone)).map((z) => ({ ...z, writable: canWrite(access, z.zone) }));
  };

  app.get('/', { schema: hidden, config: { auth: signedIn } }, async (request, reply) => {
    const user = userOf(request);
    const speech = hasPermission(user, 'speech.use');
    const [summary, recent, workers, readable, size] = await Promise.all([
      speech ? deps.speech.jobs.summary(user) : null,
      // Queue managers see everyone's jobs here, as their counts do.
      speech ? deps.speech.jobs.list(user, { limit: 5, all: true }) : [],
      deps.workers.listWorkers(),
      readableZones(request),
      archiveSize(dbOf(deps.orm.em), DEFAULT_IRC_SOURCE),
    ]);
    const online = workers.filter((w) => w.fresh);
    const body = html`<div class="card"><h1>Welcome, ${user.username}</h1>
        <p class="muted">${user.isAdmin ? 'Administrator' : `Permissions: ${user.permissions.join(', ') || 'none'}`}</p>
        ${
          summary
            ? html`<dl class="stats" id="queue-counts">
          <div><dt>Queued</dt><dd data-count="queued">${summary.summary.queued}</dd></div>
          <div><dt>Processing</dt><dd data-count="processing">${summary.summary.processing}</dd></div>
          <div><dt>Completed</dt><dd data-count="completed">${summary.summary.completed}</dd></div>
          <div><dt>Failed</dt><dd data-count="failed">${summary.summary.failed}</dd></div></dl>`
            : ''
        }</div>
      <div class="dash">
        ${
          speech
            ? html`<div class="card" id="recent-jobs"><h2>Recent jobs</h2>${
                recent.length
                  ? html`<ul>${recent.map((j) => {
                      const p = presentJob(j, { publicBaseUrl: deps.config.PUBLIC_BASE_URL });
                      return html`<li><a href="/speech/jobs/${p.id}">${p.source_label}</a> <span class="badge" data-status="${p.status}">${p.status_label}</span></li>`;
                    })}</ul>`
                  : html`<p class="muted">No jobs yet.</p>`
              }<p><a href="/speech">Open the speech queue</a></p></div>`
            : ''
        }
        <div class="card" id="worker-presence"><h2>Workers</h2>
          <p><strong>${online.length}</strong> of ${workers.filter((w) => !w.revoked).length} registered workers online.</p>
          ${online.length ? html`<ul>${online.map((w) => html`<li>${w.name}</li>`)}</ul>` : html`<p class="muted">No worker is connected: queued jobs wait.</p>`}
          ${user.isAdmin ? html`<p><a href="/admin/workers">Manage workers</a></p>` : ''}</div>
        <div class="card" id="zones"><h2>DNS zones</h2><p><strong>${readable.length}</strong> ${readable.length === 1 ? 'zone' : 'zones'} you can read.</p>
          <p><a href="/dns">DNS zones</a></p></div>
        <div class="card" id="archive"><h2>Chat-log archive</h2>
          <p>${plural(size.events, 'event')} in ${plural(size.channels, 'channel')} on ${plural(size.networks, 'network')}.</p><p><a href="/irc">Chat logs</a></p></div>
      </div>
      <div class="card"><h2>More</h2><ul><li><a href="/account">Personal access tokens</a></li><li><a href="/statuspages">Status pages</a></li><li><a href="/guestbooks">Guestbooks</a></li><li><a href="/docs">API reference (OpenAPI)</a></li><li><a href="/api/platform">Platform version</a></li></ul></div>`;
    return sendPage(reply, { title: 'Home', user, active: 'home', body });
  });

  // ---- administration ------------------------------------------------------------------------

  const adminPage = async (request: FastifyRequest, status: number, reply: Parameters<typeof sendPage>[0], error?: string, notice?: string) => {
    const user = userOf(request);
    const setting = await localModels.get();
    const csrf = reply.generateCsrf();
    const body = html`${notice ? html`<div class="card notice" role="status" id="notice"><p>${notice}</p></div>` : ''}<div class="card"><h1>Administration</h1>
        <ul><li><a href="/admin/workers">Workers</a>: presence, contract, capabilities, current job, revoke</li><li><a href="/admin/assistant">Organization assistant</a>: tenant setups, delegation, consent, connections, prompt test</li><li><a href="/admin/dns-providers">DNS provider zones</a>: Cloudflare mappings, token references, imported and detected zones</li><li><a href="/docs">API reference</a> (DNS zones, chat-log aliases, run-now)</li></ul></div>
      <div class="card" id="local-models"><h2>Local model allowlist</h2>
        <p class="muted">Models the coordinator's own local runner takes automatically. Jobs that need another model wait for a compatible remote worker. ${
          setting.source === 'environment'
            ? 'Not saved yet: the value comes from SPEECH_LOCAL_MODELS (it only seeds the setting).'
            : `Saved by ${setting.updatedBy ?? 'unknown'} on ${formatStockholm(setting.updatedAt)}.`
        }</p>
        ${error ? html`<p class="error" role="alert" id="local-models-error">${error}</p>` : ''}
        <form method="post" action="/admin/settings/local-models">${csrfField(csrf)}
          <label for="local_models">Models (comma-separated)</label><input id="local_models" name="local_models" value="${setting.models.join(', ')}" maxlength="2000">
          <button type="submit">Save</button></form></div>`;
    return sendPage(reply.code(status), { title: 'Administration', user, active: 'admin', body });
  };

  app.get('/admin', { schema: { ...hidden, querystring: z.object({ saved: z.literal('1').optional() }) }, config: { auth: admin } }, (request, reply) =>
    adminPage(request, 200, reply, undefined, request.query.saved ? 'Local model allowlist saved.' : undefined),
  );

  app.post(
    '/admin/settings/local-models',
    {
      schema: { ...hidden, body: z.object({ _csrf: z.string().max(200).optional(), local_models: z.string().max(2000).default('') }) },
      config: { auth: admin },
    },
    async (request, reply) => {
      try {
        await localModels.set(request.body.local_models.split(','), userOf(request).username);
      } catch (err) {
        const e = normalizeError(err, request);
        if (e.status === 422) return adminPage(request, 422, reply, e.message);
        throw err;
      }
      return reply.redirect('/admin?saved=1', 303);
    },
  );

  app.get('/admin/workers', { schema: hidden, config: { auth: admin } }, async (request, reply) => {
    const user = userOf(request);
    const [workers, current] = await Promise.all([deps.workers.listWorkers(), currentJobs(dbOf(deps.orm.em))]);
    const csrf = reply.generateCsrf();
    // The specification's rule 3: automatic local execution stands by while any remote worker is online.
    const isLocal = (w: (typeof workers)[number]) => Boolean((w.capabilities as { local?: boolean } | null)?.local);
    const remoteOnline = workers.some((w) => !isLocal(w) && w.fresh);
    const rows = workers.map((w) => {
      const caps = w.capabilities;
      const job = current.get(w.id);
      const local = isLocal(w);
      const jobCell = job
        ? html`<a href="/speech/jobs/${job.id}">${job.label}</a>`
        : local && w.fresh && remoteOnline
          ? html`<span class="muted" data-standby="1">standing by: a remote worker is online, so automatic jobs go to remote workers (a job targeted at this runner still runs here)</span>`
          : html`<span class="muted">idle</span>`;
      const why = targetIncompatibility(w);
      return html`<tr data-worker="${w.name}"><td data-label="Worker"><strong>${breakAtDots(w.name)}</strong>${w.hostname ? html`<br><span class="muted">${breakAtDots(w.hostname)}</span>` : ''}</td>
        <td data-label="Presence"><span class="badge ${w.revoked ? 'bad' : w.fresh ? 'on' : 'off'}" data-presence="${w.revoked ? 'revoked' : w.fresh ? 'online' : 'offline'}">${w.revoked ? 'revoked' : w.fresh ? 'online' : 'offline'}</span></td>
        <td data-label="Contract">${w.contractVersion ?? '—'}${w.agentVersion ? html`<br><span class="muted">agent ${w.agentVersion}</span>` : ''}</td>
        <td data-label="Capabilities">${
          caps
            ? html`${(caps.models ?? []).join(', ') || 'no models'}<br><span class="muted">${caps.device ?? ''}${caps.diarization ? ' · diarizer' : ''}${caps.canFetchUrls ? ' · fetches URLs' : ''}${(caps as { local?: boolean }).local ? ' · local runner' : ''}</span>${why ? html`<br><span class="error">incompatible: ${why}</span>` : ''}`
            : html`<span class="muted">not reported yet</span>`
        }</td>
        <td data-label="Current job">${jobCell}</td>
        <td data-label="Last heartbeat">${w.lastSeenAt ? html`<time datetime="${w.lastSeenAt.toISOString()}">${formatStockholm(w.lastSeenAt)}</time>` : 'never'}</td>
        <td class="actions">${
          w.revoked
            ? ''
            : local
              ? html`<span class="muted">the coordinator's own runner: it stops with the coordinator (the CLI's <code>worker:revoke</code> still revokes it)</span>`
              : html`<form method="post" action="/admin/workers/${w.name}/revoke" data-confirm="Revoke ${w.name}? Its secret stops working at once.">${csrfField(csrf)}<button class="danger" type="submit">Revoke</button></form>`
        }</td></tr>`;
    });
    const body = html`<div class="card"><h1>Workers</h1>
      <p class="muted">Registered worker agents. New workers and secrets come from the admin CLI (<code>npm run cli -- worker:create NAME</code>).</p>
      ${
        rows.length
          ? html`<div class="table-wrap stack"><table id="worker-table"><thead><tr><th>Worker</th><th>Presence</th><th>Contract</th><th>Capabilities</th><th>Current job</th><th>Last heartbeat</th><th></th></tr></thead><tbody>${rows}</tbody></table></div>`
          : html`<p id="no-workers">No worker is registered.</p>`
      }</div>`;
    return sendPage(reply, { title: 'Workers', user, active: 'admin', body });
  });

  app.post(
    '/admin/workers/:name/revoke',
    {
      schema: { ...hidden, params: z.object({ name: z.string().max(100) }), body: z.object({ _csrf: z.string().max(200).optional() }).optional() },
      config: { auth: admin },
    },
    async (request, reply) => {
      if (!(await deps.workers.revokeWorker(request.params.name))) throw validationFailed({ name: [`no worker named "${request.params.name}"`] });
      request.log.info({ worker: request.params.name, by: userOf(request).username }, 'worker revoked from the admin page');
      return reply.redirect('/admin/workers', 303);
    },
  );
}
