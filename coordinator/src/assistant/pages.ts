import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formBody from '@fastify/formbody';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { formatStockholm, safeString } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement, AuthUser } from '../accounts/types.js';
import { normalizeError } from '../http/errors.js';
import { html, type SafeHtml } from '../http/html.js';
import { pageErrorHandler, sendPage } from '../http/page.js';
import type { AssistantService, ConnectionView, SetupView } from './assistant-service.js';
import { AssistantError } from './errors.js';
import type { RespondResult } from './respond.js';
import { DEFAULT_SCOPES } from './validation.js';

/** Administrators, and users a setup was delegated to (they need the ai.assistant permission). */
const pageAuth: AuthRequirement = { accept: ['session'], permissions: ['ai.assistant'] };
const hidden = { hide: true } as const;
const csrfField = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`;
const line = (max: number) => safeString().trim().max(max);
const slugParams = z.object({ slug: safeString().max(64) });

const setupForm = z.object({
  _csrf: z.string().max(200).optional(),
  slug: line(64).default(''),
  display_name: line(200).min(1),
  client_id: line(64),
  credential_kind: z.enum(['secret', 'certificate']).default('secret'),
  client_secret: z.string().max(2000).optional(),
  certificate_pem: safeString({ multiline: true }).max(20_000).optional(),
  private_key_pem: safeString({ multiline: true }).max(20_000).optional(),
  redirect_uri: line(2000).optional(),
  graph_url: line(2000).default('https://graph.microsoft.com'),
  authority_host: line(2000).default('https://login.microsoftonline.com'),
  scopes: safeString({ multiline: true }).max(4000).optional(),
  time_zone: line(64).default('UTC'),
});

interface PageState {
  status?: number;
  notice?: string;
  error?: AssistantError;
  test?: { slug: string; prompt: string; result: RespondResult };
}

/** The browser administration page of the connector (`/admin/assistant`); it works without JavaScript. */
export async function assistantPages(base: FastifyInstance, service: AssistantService) {
  await base.register(formBody);
  const app = base.withTypeProvider<ZodTypeProvider>();

  const render = async (request: FastifyRequest, reply: FastifyReply, state: PageState = {}) => {
    const user = userOf(request);
    const [setups, connections] = await Promise.all([service.setupsFor(user), service.connectionsOf(user)]);
    const csrf = reply.generateCsrf();
    allowFormTargets(reply, setups);
    const body = html`<div class="card"><h1>Organization assistant</h1>
        <p class="muted">Prompts go to the organization’s assistant through the graph API on behalf of a connected work or school account
        (never a personal account, never another AI provider). Connect signs in through the multi-organization authority; API clients then call
        <code>POST /api/ai/assistant/respond</code> with a personal access token of scope <code>ai.assistant</code> (<a href="/account">tokens</a>).</p></div>
      ${state.notice ? html`<div class="card notice" role="status" id="notice"><p>${state.notice}</p></div>` : ''}
      ${state.error ? errorCard(state.error) : ''}
      ${state.test ? testCard(state.test) : ''}
      ${setups.length ? setups.map((s) => setupCard(s, connections.find((c) => c.setup_slug === s.slug) ?? null, user, csrf)) : html`<div class="card"><p id="no-setups">${user.isAdmin ? 'No tenant setup yet: create one below.' : 'No assistant setup has been delegated to you; ask an administrator.'}</p></div>`}
      ${user.isAdmin ? createCard(csrf, service.defaultRedirectUri) : ''}`;
    return sendPage(reply.code(state.status ?? 200), { title: 'Assistant', user, active: user.isAdmin ? 'admin' : 'assistant', body });
  };

  /** Connector errors are shown on the page with their code and what to do; others get the console's error handling. */
  app.setErrorHandler(async (error, request, reply) => {
    if (error instanceof AssistantError && request.principal) return render(request, reply, { status: error.status, error });
    return pageErrorHandler(request, reply, normalizeError(error, request));
  });

  app.get(
    '/admin/assistant',
    {
      schema: {
        ...hidden,
        querystring: z.object({ notice: z.enum(['saved', 'delegated', 'consent', 'connected']).optional(), slug: safeString().max(64).optional() }),
      },
      config: { auth: pageAuth },
    },
    async (request, reply) => {
      const { notice, slug } = request.query;
      const text = notice
        ? {
            saved: `Setup ${slug ?? ''} saved. Its credential is stored encrypted and is not shown again. Next: make sure the app registration lists the setup's redirect URI (below), then press "Connect account" to sign in with an organizational account.`,
            delegated: `Delegates of ${slug ?? ''} updated.`,
            consent: `The identity provider answered the tenant-wide consent for ${slug ?? ''}.`,
            connected: `Account connected to ${slug ?? ''}.`,
          }[notice]
        : undefined;
      return render(request, reply, text ? { notice: text } : {});
    },
  );

  const toInput = (b: z.infer<typeof setupForm>) => ({
    ...b,
    redirect_uri: b.redirect_uri || service.defaultRedirectUri,
    scopes: (b.scopes ?? '').split(/[\s,]+/).filter(Boolean).length ? (b.scopes ?? '').split(/[\s,]+/).filter(Boolean) : [...DEFAULT_SCOPES],
    client_secret: b.client_secret || undefined,
    certificate_pem: b.certificate_pem || undefined,
    private_key_pem: b.private_key_pem || undefined,
  });

  app.post('/admin/assistant/setups', { schema: { ...hidden, body: setupForm }, config: { auth: pageAuth } }, async (request, reply) => {
    const saved = await service.saveSetup(toInput(request.body), userOf(request));
    return reply.redirect(`/admin/assistant?notice=saved&slug=${encodeURIComponent(saved.slug)}`, 303);
  });

  app.post(
    '/admin/assistant/setups/:slug',
    { schema: { ...hidden, params: slugParams, body: setupForm }, config: { auth: pageAuth } },
    async (request, reply) => {
      const saved = await service.saveSetup({ ...toInput(request.body), slug: request.params.slug }, userOf(request), request.params.slug);
      return reply.redirect(`/admin/assistant?notice=saved&slug=${encodeURIComponent(saved.slug)}`, 303);
    },
  );

  app.post(
    '/admin/assistant/setups/:slug/delegates',
    {
      schema: {
        ...hidden,
        params: slugParams,
        body: z.object({ _csrf: z.string().max(200).optional(), username: line(100).min(1), remove: z.enum(['1']).optional() }),
      },
      config: { auth: pageAuth },
    },
    async (request, reply) => {
      await service.delegate(request.params.slug, request.body.username, userOf(request), request.body.remove === '1');
      return reply.redirect(`/admin/assistant?notice=delegated&slug=${encodeURIComponent(request.params.slug)}`, 303);
    },
  );

  const sessionId = (request: FastifyRequest) => request.session.sessionId;

  app.post(
    '/admin/assistant/setups/:slug/consent',
    { schema: { ...hidden, params: slugParams, body: z.object({ _csrf: z.string().max(200).optional() }).optional() }, config: { auth: pageAuth } },
    async (request, reply) => reply.redirect(await service.consentUrl(userOf(request), request.params.slug, sessionId(request), request.id), 303),
  );

  app.post(
    '/admin/assistant/setups/:slug/connect',
    { schema: { ...hidden, params: slugParams, body: z.object({ _csrf: z.string().max(200).optional() }).optional() }, config: { auth: pageAuth } },
    async (request, reply) => reply.redirect(await service.beginConnect(userOf(request), request.params.slug, sessionId(request), request.id), 303),
  );

  // The redirect URI of every setup: the identity provider sends the browser back here.
  app.get(
    '/admin/assistant/callback',
    {
      schema: {
        ...hidden,
        querystring: z.object({
          code: z.string().max(8000).optional(),
          state: z.string().max(200).optional(),
          error: safeString().max(200).optional(),
          error_description: safeString({ multiline: true }).max(4000).optional(),
          admin_consent: safeString().max(10).optional(),
          tenant: safeString().max(100).optional(),
          session_state: z.string().max(200).optional(),
          client_info: z.string().max(2000).optional(),
          scope: z.string().max(4000).optional(),
        }),
      },
      config: { auth: pageAuth },
    },
    async (request, reply) => {
      const done = await service.completeCallback(userOf(request), sessionId(request), request.query, request.id);
      if (done.kind === 'consent') return reply.redirect(`/admin/assistant?notice=consent&slug=${encodeURIComponent(done.slug)}`, 303);
      return reply.redirect(`/admin/assistant?notice=connected&slug=${encodeURIComponent(done.slug)}`, 303);
    },
  );

  app.post(
    '/admin/assistant/setups/:slug/test',
    {
      schema: {
        ...hidden,
        params: slugParams,
        body: z.object({ _csrf: z.string().max(200).optional(), prompt: safeString({ multiline: true }).trim().min(1).max(10_000) }),
      },
      config: { auth: pageAuth },
    },
    async (request, reply) => {
      const result = await service.respond(
        userOf(request),
        { user_prompt: request.body.prompt },
        { requestId: request.id, slug: request.params.slug, action: 'prompt_test' },
      );
      return render(request, reply, { test: { slug: request.params.slug, prompt: request.body.prompt, result } });
    },
  );
}

/**
 * The connect and consent forms post here and are redirected to the identity provider; browsers
 * apply the page's CSP `form-action` to that redirect, so this page also allows the setups'
 * authority hosts (and nothing else).
 */
function allowFormTargets(reply: FastifyReply, setups: SetupView[]) {
  const csp = reply.getHeader('content-security-policy');
  if (typeof csp !== 'string') return;
  const origins = [...new Set(setups.map((s) => new URL(s.authority_host).origin))];
  if (origins.length) void reply.header('content-security-policy', csp.replace("form-action 'self'", `form-action 'self' ${origins.join(' ')}`));
}

const STATUS_LABEL: Record<ConnectionView['status'], string> = {
  ready: 'ready',
  reconnect_required: 'reconnect required',
  licence_missing: 'licence missing',
  invalid: 'validation failed',
};

function setupCard(s: SetupView, c: ConnectionView | null, user: AuthUser, csrf: string): SafeHtml {
  const status = c?.status ?? 'not_connected';
  const v = c?.last_validation;
  return html`<div class="card assistant-setup" id="setup-${s.slug}"><h2>${s.display_name} <span class="muted mono">${s.slug}</span></h2>
    <div class="table-wrap"><table><tbody>
      <tr><th>Your connection</th><td><span class="badge ${status === 'ready' ? 'on' : status === 'not_connected' ? 'off' : 'bad'}" data-connection-status="${status}">${c ? STATUS_LABEL[c.status] : 'not connected'}</span>
        ${c?.account ? html` as <span class="mono" data-account>${c.account}</span>` : ''}${c?.tenant_id ? html` · tenant <span class="mono">${c.tenant_id}</span>` : ''}
        ${c?.connected_at ? html` · connected ${formatStockholm(new Date(c.connected_at))}` : ''}</td></tr>
      <tr><th>Last validation</th><td data-last-validation="${v ? (v.ok ? 'ok' : (v.code ?? 'failed')) : 'none'}">${v ? html`${v.ok ? 'passed' : html`<strong>${v.code ?? 'failed'}</strong>`}: ${v.message}${v.missing_scopes.length ? html` Missing: <span class="mono">${v.missing_scopes.join(', ')}</span>.` : ''} <span class="muted">(${formatStockholm(new Date(v.at))})</span>` : 'never'}</td></tr>
      <tr><th>Application (client) id</th><td class="mono">${s.client_id}</td></tr>
      <tr><th>Credential</th><td>${s.credential_kind === 'secret' ? 'client secret' : 'certificate'}, saved encrypted (never shown)</td></tr>
      <tr><th>Redirect URI</th><td class="mono">${s.redirect_uri}</td></tr>
      <tr><th>Authority</th><td class="mono">${s.authority_host}/organizations</td></tr>
      <tr><th>Graph API</th><td class="mono">${s.graph_url}</td></tr>
      <tr><th>Scopes</th><td class="mono">${s.scopes.join(' ')}</td></tr>
      <tr><th>Time zone</th><td>${s.time_zone}</td></tr>
    </tbody></table></div>
    <form method="post" action="/admin/assistant/setups/${s.slug}/connect" class="inline">${csrfField(csrf)}<button type="submit" id="connect-${s.slug}">${c ? 'Reconnect account' : 'Connect account'}</button></form>
    ${user.isAdmin ? html`<form method="post" action="/admin/assistant/setups/${s.slug}/consent" class="inline">${csrfField(csrf)}<button type="submit" class="secondary">Grant tenant-wide consent</button></form>` : ''}
    <h3>Prompt test</h3>
    <form method="post" action="/admin/assistant/setups/${s.slug}/test">${csrfField(csrf)}
      <label for="prompt-${s.slug}">Prompt</label><textarea id="prompt-${s.slug}" name="prompt" rows="3" maxlength="10000" required>Say hello and name today's date.</textarea>
      <button type="submit" id="test-${s.slug}">Send to the assistant</button></form>
    ${
      user.isAdmin
        ? html`<h3>Delegated to</h3>${s.delegates.length ? html`<ul class="delegates">${s.delegates.map((d) => html`<li>${d.username} <form method="post" action="/admin/assistant/setups/${s.slug}/delegates" class="inline">${csrfField(csrf)}<input type="hidden" name="username" value="${d.username}"><input type="hidden" name="remove" value="1"><button type="submit" class="link">remove</button></form></li>`)}</ul>` : html`<p class="muted">Nobody but administrators.</p>`}
      <form method="post" action="/admin/assistant/setups/${s.slug}/delegates">${csrfField(csrf)}<label for="delegate-${s.slug}">Delegate to user</label><input id="delegate-${s.slug}" name="username" maxlength="100" required><button type="submit">Delegate</button></form>
      <details><summary>Edit setup</summary>${setupFields(csrf, `/admin/assistant/setups/${s.slug}`, s, s.redirect_uri)}</details>`
        : ''
    }</div>`;
}

function setupFields(csrf: string, action: string, s: SetupView | null, redirect: string): SafeHtml {
  return html`<form method="post" action="${action}" class="assistant-setup-form">${csrfField(csrf)}
    ${s ? '' : html`<label for="new-slug">Connector slug</label><input id="new-slug" name="slug" required pattern="[a-z0-9][a-z0-9-]{0,62}" maxlength="63">`}
    <label>Display name<input name="display_name" required maxlength="200" value="${s?.display_name ?? ''}"></label>
    <label>Application (client) id<input name="client_id" required maxlength="64" value="${s?.client_id ?? ''}"></label>
    <label>Credential<select name="credential_kind"><option value="secret" ${s?.credential_kind === 'certificate' ? '' : html`selected`}>client secret</option><option value="certificate" ${s?.credential_kind === 'certificate' ? html`selected` : ''}>certificate</option></select></label>
    <label>Client secret${s ? ' (leave empty to keep the saved one)' : ''}<input name="client_secret" type="password" autocomplete="off" maxlength="2000"></label>
    <label>Certificate (PEM)<textarea name="certificate_pem" rows="2" maxlength="20000"></textarea></label>
    <label>Private key (PEM)<textarea name="private_key_pem" rows="2" maxlength="20000"></textarea></label>
    <label>Redirect URI<input name="redirect_uri" maxlength="2000" value="${redirect}"></label>
    <label>Graph API URL<input name="graph_url" maxlength="2000" value="${s?.graph_url ?? 'https://graph.microsoft.com'}"></label>
    <label>Authority host<input name="authority_host" maxlength="2000" value="${s?.authority_host ?? 'https://login.microsoftonline.com'}"></label>
    <label>Scopes<textarea name="scopes" rows="2" maxlength="4000">${(s?.scopes ?? DEFAULT_SCOPES).join(' ')}</textarea></label>
    <label>Time zone (IANA)<input name="time_zone" maxlength="64" value="${s?.time_zone ?? 'UTC'}"></label>
    <button type="submit">Save setup</button></form>`;
}

function createCard(csrf: string, redirect: string): SafeHtml {
  return html`<div class="card" id="new-setup"><h2>New tenant setup</h2>
    <p class="muted">An app registration that accepts accounts in any organizational directory (multitenant), with the redirect URI below on its Web platform
    and the delegated permissions below. The secret is stored encrypted (ASSISTANT_SECRET_KEY) and never shown again.</p>
    ${setupFields(csrf, '/admin/assistant/setups', null, redirect)}</div>`;
}

function errorCard(e: AssistantError): SafeHtml {
  return html`<div class="card" role="alert" id="assistant-error" data-code="${e.code}"><h2>${e.status === 502 ? 'The assistant could not answer' : 'Cannot do that'}</h2>
    <p class="error">${e.message}</p>
    ${e.extra.identity_provider_code ? html`<p>Identity-provider code: <strong class="mono" id="idp-code">${e.extra.identity_provider_code}</strong></p>` : ''}
    ${e.extra.action ? html`<p id="idp-action">${e.extra.action}</p>` : ''}
    ${e.extra.missing_scopes?.length ? html`<p>Missing permissions: <span class="mono" id="missing-scopes">${e.extra.missing_scopes.join(', ')}</span></p>` : ''}</div>`;
}

function testCard(t: NonNullable<PageState['test']>): SafeHtml {
  const d = t.result.diagnostics;
  return html`<div class="card" id="prompt-test"><h2>Prompt test: ${t.slug}</h2>
    <p class="muted">${t.prompt}</p><blockquote id="test-reply">${t.result.reply}</blockquote>
    <div class="table-wrap"><table id="test-diagnostics"><tbody>
      <tr><th>Provider</th><td data-provider>${d.provider}</td></tr><tr><th>Upstream</th><td class="mono">${d.upstream}</td></tr>
      <tr><th>Account</th><td>${t.result.connector.account ?? ''} (tenant ${t.result.connector.tenant_id ?? '?'})</td></tr>
      <tr><th>Conversation</th><td class="mono">${t.result.connector.conversation_id}</td></tr>
      <tr><th>Token</th><td>${d.token_source}</td></tr><tr><th>Time zone</th><td>${d.time_zone}</td></tr>
      <tr><th>Request id</th><td class="mono">${d.request_id}</td></tr><tr><th>Upstream request id</th><td class="mono">${d.upstream_request_id ?? '—'}</td></tr>
      <tr><th>Duration</th><td>${d.duration_ms} ms</td></tr></tbody></table></div></div>`;
}
