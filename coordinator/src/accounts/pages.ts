import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formBody from '@fastify/formbody';
import { TOKEN_SCOPES } from '@sonar/shared';
import type { Config } from '../config.js';
import { AppError, normalizeError } from '../http/errors.js';
import { html, layout } from '../http/html.js';
import type { AccountService } from './account-service.js';
import { userOf } from './auth-plugin.js';
import type { AuthRequirement, AuthUser } from './types.js';

const sessionOnly: AuthRequirement = { accept: ['session'] };

/** Only same-site paths, so the login form cannot be turned into an open redirect. */
function safeNext(value: unknown): string {
  return typeof value === 'string' && /^\/(?!\/)[^\s\\]*$/.test(value) ? value : '/';
}

/** Browser pages: sign in, sign out, home, and personal access tokens. */
export async function accountPages(app: FastifyInstance, opts: { config: Config; accounts: AccountService }) {
  const { config, accounts } = opts;
  await app.register(formBody);

  // Pages answer in HTML: an anonymous visitor is sent to the sign-in page, other errors get a page.
  app.setErrorHandler((error, request, reply) => {
    const e = normalizeError(error, request);
    if (e.reason === 'unauthenticated') {
      return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 303);
    }
    return reply
      .code(e.status)
      .type('text/html; charset=utf-8')
      .send(page(reply, 'Error', html`<div class="card"><h1>Something went wrong</h1><p class="error">${e.message}</p><p><a href="/">Back</a></p></div>`, null));
  });

  function page(reply: FastifyReply, title: string, body: ReturnType<typeof html>, user: AuthUser | null): string {
    return layout({ title, body, user, csrf: user ? reply.generateCsrf() : '' });
  }

  function loginForm(reply: FastifyReply, next: string, error?: string, username = '') {
    const csrf = reply.generateCsrf();
    return layout({
      title: 'Sign in',
      body: html`<div class="card" style="max-width:26rem;margin:3rem auto">
        <h1>Sign in</h1>
        ${error ? html`<p class="error" role="alert">${error}</p>` : ''}
        <form method="post" action="/login">
          <input type="hidden" name="_csrf" value="${csrf}">
          <input type="hidden" name="next" value="${next}">
          <label for="username">Username</label>
          <input id="username" name="username" autocomplete="username" required value="${username}" autofocus>
          <label for="password">Password</label>
          <input id="password" name="password" type="password" autocomplete="current-password" required>
          <button type="submit">Sign in</button>
        </form></div>`,
    });
  }

  const hidden = { hide: true } as const;

  app.get('/login', { schema: hidden }, async (request, reply) => {
    const next = safeNext((request.query as Record<string, unknown>).next);
    if (await app.sessionUser(request)) return reply.redirect(next, 303);
    return reply.type('text/html; charset=utf-8').send(loginForm(reply, next));
  });

  app.post(
    '/login',
    { schema: hidden, config: { rateLimit: { max: config.LOGIN_RATE_LIMIT_PER_MINUTE, timeWindow: 60_000 } } },
    async (request: FastifyRequest, reply) => {
      const body = (request.body ?? {}) as Record<string, unknown>;
      const next = safeNext(body.next);
      try {
        app.verifyCsrf(request);
      } catch {
        return reply.code(403).type('text/html; charset=utf-8').send(loginForm(reply, next, 'Your sign-in form expired; please try again.'));
      }
      const username = typeof body.username === 'string' ? body.username : '';
      const password = typeof body.password === 'string' ? body.password : '';
      try {
        const user = await accounts.authenticatePassword(username, password);
        // A new session id on sign-in: a session planted before login is worth nothing after it.
        await request.session.regenerate();
        request.session.userId = user.id;
        request.log.info({ userId: user.id }, 'web sign-in');
        return reply.redirect(next, 303);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        return reply.code(401).type('text/html; charset=utf-8').send(loginForm(reply, next, err.message, username));
      }
    },
  );

  app.post('/logout', { schema: hidden, config: { auth: sessionOnly } }, async (request, reply) => {
    await request.session.destroy();
    return reply.redirect('/login', 303);
  });

  app.get('/', { schema: hidden, config: { auth: sessionOnly } }, async (request, reply) => {
    const user = userOf(request);
    const body = html`<div class="card"><h1>Welcome, ${user.username}</h1>
      <p class="muted">${user.isAdmin ? 'Administrator' : `Permissions: ${user.permissions.join(', ') || 'none'}`}</p>
      <ul><li><a href="/account">Personal access tokens</a></li><li><a href="/docs">API reference (OpenAPI)</a></li>
      <li><a href="/api/platform">Platform version</a></li></ul></div>`;
    return reply.type('text/html; charset=utf-8').send(page(reply, 'Home', body, user));
  });

  async function accountPage(request: FastifyRequest, reply: FastifyReply, created?: { name: string; token: string }, error?: string) {
    const user = userOf(request);
    const tokens = await accounts.listPersonalTokens(user.id);
    const csrf = reply.generateCsrf();
    const rows = tokens.map(
      (t) => html`<tr><td>${t.name}</td><td><code>${t.prefix}…</code></td><td>${t.scopes.join(', ')}</td>
        <td>${t.createdAt.toISOString().slice(0, 10)}</td><td>${t.expiresAt ? t.expiresAt.toISOString().slice(0, 10) : 'never'}</td>
        <td>${t.revokedAt ? 'revoked' : html`<form class="inline" method="post" action="/account/tokens/${t.id}/revoke">
          <input type="hidden" name="_csrf" value="${csrf}"><button class="link" type="submit">Revoke</button></form>`}</td></tr>`,
    );
    const body = html`
      ${created ? html`<div class="card" role="status"><h2>Token “${created.name}” created</h2>
        <p>Copy it now; it will not be shown again.</p><p class="secret" data-testid="new-token">${created.token}</p></div>` : ''}
      <div class="card"><h1>Personal access tokens</h1>
        ${rows.length ? html`<table><thead><tr><th>Name</th><th>Token</th><th>Scopes</th><th>Created</th><th>Expires</th><th></th></tr></thead><tbody>${rows}</tbody></table>` : html`<p class="muted">No tokens yet.</p>`}
      </div>
      <div class="card"><h2>New token</h2>
        ${error ? html`<p class="error" role="alert">${error}</p>` : ''}
        <form method="post" action="/account/tokens">
          <input type="hidden" name="_csrf" value="${csrf}">
          <label for="name">Name</label><input id="name" name="name" required maxlength="100">
          <label>Scopes</label><div class="checks">${TOKEN_SCOPES.map((s) => html`<label><input type="checkbox" name="scopes" value="${s}">${s}</label>`)}</div>
          <label for="expires">Expires after (days, empty for never)</label><input id="expires" name="expires_in_days" type="number" min="1" max="3650">
          <button type="submit">Create token</button>
        </form></div>`;
    return reply.type('text/html; charset=utf-8').send(page(reply, 'Tokens', body, user));
  }

  app.get('/account', { schema: hidden, config: { auth: sessionOnly } }, (request, reply) => accountPage(request, reply));

  app.post('/account/tokens', { schema: hidden, config: { auth: sessionOnly } }, async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    const scopes = ([] as unknown[]).concat(body.scopes ?? []).filter((s): s is string => typeof s === 'string');
    const days = typeof body.expires_in_days === 'string' && body.expires_in_days !== '' ? Number(body.expires_in_days) : undefined;
    try {
      const { token, record } = await accounts.createPersonalToken(userOf(request).id, {
        name: typeof body.name === 'string' ? body.name : '',
        scopes,
        ...(days !== undefined && Number.isInteger(days) && days > 0 ? { expiresInDays: days } : {}),
      });
      return accountPage(request, reply.code(201), { name: record.name, token });
    } catch (err) {
      if (err instanceof AppError && err.reason === 'validation_failed') return accountPage(request, reply.code(422), undefined, err.message);
      throw err;
    }
  });

  app.post('/account/tokens/:tokenId/revoke', { schema: hidden, config: { auth: sessionOnly } }, async (request, reply) => {
    const id = Number((request.params as Record<string, string>).tokenId);
    const user = userOf(request);
    if (Number.isInteger(id)) await accounts.revokePersonalToken(id, { ownerId: user.id });
    return reply.redirect('/account', 303);
  });
}
