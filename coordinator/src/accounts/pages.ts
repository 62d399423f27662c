import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formBody from '@fastify/formbody';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { TOKEN_SCOPES, safeString, idParam } from '@sonar/shared';
import type { Config } from '../config.js';
import { AppError, normalizeError } from '../http/errors.js';
import { html } from '../http/html.js';
import { pageErrorHandler, sendPage } from '../http/page.js';
import { sharedRateLimit } from '../http/rate-limits.js';
import { SPEECH_API_PERMISSIONS, SPEECH_API_TOKEN_NAME, type AccountService } from './account-service.js';
import { userOf } from './auth-plugin.js';
import { hasPermission, type AuthRequirement } from './types.js';

const sessionOnly: AuthRequirement = { accept: ['session'] };

/** Only same-site paths, so the login form cannot be turned into an open redirect. */
function safeNext(value: unknown): string {
  return typeof value === 'string' && /^\/(?!\/)[^\s\\]*$/.test(value) ? value : '/';
}

// Form bodies as browsers send them (every field a string, repeated fields an array).
const csrfField = { _csrf: z.string().max(200).optional() };
const loginBody = z.object({
  ...csrfField,
  username: safeString().max(200).default(''),
  password: z.string().max(1024).default(''),
  next: z.string().max(2000).optional(),
});
const tokenBody = z.object({
  ...csrfField,
  name: safeString().max(200).default(''),
  scopes: z.union([z.string(), z.array(z.string())]).optional(),
  expires_in_days: z.union([z.literal(''), z.coerce.number().int()]).optional(),
});

/** Browser pages: sign in, sign out, and personal access tokens (the home page is console/dashboard.ts). */
export async function accountPages(base: FastifyInstance, opts: { config: Config; accounts: AccountService }) {
  const { config, accounts } = opts;
  await base.register(formBody);
  const app = base.withTypeProvider<ZodTypeProvider>();

  // Pages answer in HTML: an anonymous visitor is sent to the sign-in page, other errors get the error page.
  app.setErrorHandler((error, request, reply) => pageErrorHandler(request, reply, normalizeError(error, request)));

  function loginForm(reply: FastifyReply, next: string, error?: string, username = '') {
    const csrf = reply.generateCsrf();
    return sendPage(reply, {
      user: null,
      title: 'Sign in',
      body: html`<div class="card narrow">
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
  // Shared with POST /api/account/login and the token API (accounts/routes.ts): one budget each.
  const loginLimit = sharedRateLimit(base, 'login', config.LOGIN_RATE_LIMIT_PER_MINUTE);
  const tokenLimit = sharedRateLimit(base, 'tokens', config.TOKEN_RATE_LIMIT_PER_MINUTE);

  app.get(
    '/login',
    { schema: { ...hidden, querystring: z.object({ next: z.string().max(2000).optional() }) }, config: { auth: 'public' } },
    async (request, reply) => {
      const next = safeNext(request.query.next);
      if (await app.sessionUser(request)) return reply.redirect(next, 303);
      return loginForm(reply, next);
    },
  );

  app.post('/login', { schema: { ...hidden, body: loginBody }, config: { auth: 'public' }, onRequest: loginLimit }, async (request, reply) => {
    const { username, password } = request.body;
    const next = safeNext(request.body.next);
    try {
      app.verifyCsrf(request);
    } catch {
      return loginForm(reply.code(403), next, 'Your sign-in form expired; please try again.');
    }
    try {
      const user = await accounts.authenticatePassword(username, password);
      // A new session id on sign-in: a session planted before login is worth nothing after it.
      await request.session.regenerate();
      request.session.userId = user.id;
      request.log.info({ userId: user.id }, 'web sign-in');
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return loginForm(reply.code(401), next, err.message, username);
    }
    return reply.redirect(next, 303);
  });

  app.post('/logout', { schema: { ...hidden, body: z.object(csrfField).optional() }, config: { auth: sessionOnly } }, async (request, reply) => {
    const sessionId = request.session.sessionId;
    await request.session.destroy();
    opts.accounts.sessionEnded(sessionId);
    return reply.redirect('/login', 303);
  });

  async function accountPage(
    request: FastifyRequest,
    reply: FastifyReply,
    created?: { name: string; token: string; callbackSecret: string; revoked?: number },
    error?: string,
    speechError?: string,
  ) {
    const user = userOf(request);
    const tokens = await accounts.listPersonalTokens(user.id);
    const csrf = reply.generateCsrf();
    const mayUseSpeechApi = SPEECH_API_PERMISSIONS.every((p) => hasPermission(user, p));
    const hasSpeechApiToken = tokens.some((t) => t.name === SPEECH_API_TOKEN_NAME && !t.revokedAt);
    const speechCard = html`<div class="card" id="speech-api-token"><h2>Speech API token</h2>
        <p>The token servers send to <code>/api/speech/transcribe</code>: named <code>${SPEECH_API_TOKEN_NAME}</code>, scope <code>speech.api</code>.
        ${hasSpeechApiToken ? 'Generating a new one revokes the current one.' : ''}</p>
        ${speechError ? html`<p class="error" role="alert">${speechError}</p>` : ''}
        ${
          mayUseSpeechApi
            ? html`<form method="post" action="/account/tokens/speech-api">
          <input type="hidden" name="_csrf" value="${csrf}">
          <button type="submit">${hasSpeechApiToken ? 'Rotate speech API token' : 'Generate speech API token'}</button>
        </form>`
            : html`<p class="muted">It needs the permissions ${SPEECH_API_PERMISSIONS.join(' and ')}; ask an administrator.</p>`
        }</div>`;
    const rows = tokens.map(
      (
        t,
      ) => html`<tr><td data-label="Name">${t.name}</td><td data-label="Token"><code>${t.prefix}…</code></td><td data-label="Scopes">${t.scopes.join(', ')}</td>
        <td data-label="Created">${t.createdAt.toISOString().slice(0, 10)}</td><td data-label="Expires">${t.expiresAt ? t.expiresAt.toISOString().slice(0, 10) : 'never'}</td>
        <td class="actions">${
          t.revokedAt
            ? 'revoked'
            : html`<form class="inline" method="post" action="/account/tokens/${t.id}/revoke">
          <input type="hidden" name="_csrf" value="${csrf}"><button class="link" type="submit">Revoke</button></form>`
        }</td></tr>`,
    );
    const body = html`
      ${
        created
          ? html`<div class="card" role="status"><h2>Token “${created.name}” created</h2>
        <p>Copy it now; it will not be shown again.</p><p class="secret" data-testid="new-token">${created.token}</p>
        ${created.revoked ? html`<p>The previous ${created.name} token was revoked.</p>` : ''}
        <p>Callback signing secret (verifies the <code>X-Sonar-Signature</code> of terminal callbacks):</p><p class="secret" data-testid="callback-secret">${created.callbackSecret}</p></div>`
          : ''
      }
      <div class="card"><h1>Personal access tokens</h1>
        ${rows.length ? html`<div class="table-wrap stack"><table id="token-table"><thead><tr><th>Name</th><th>Token</th><th>Scopes</th><th>Created</th><th>Expires</th><th></th></tr></thead><tbody>${rows}</tbody></table></div>` : html`<p class="muted">No tokens yet.</p>`}
      </div>
      ${speechCard}
      <div class="card"><h2>New token</h2>
        ${error ? html`<p class="error" role="alert">${error}</p>` : ''}
        <form method="post" action="/account/tokens">
          <input type="hidden" name="_csrf" value="${csrf}">
          <label for="name">Name</label><input id="name" name="name" required maxlength="100">
          <label>Scopes</label><div class="checks">${TOKEN_SCOPES.map((s) => html`<label><input type="checkbox" name="scopes" value="${s}">${s}</label>`)}</div>
          <label for="expires">Expires after (days, empty for never)</label><input id="expires" name="expires_in_days" type="number" min="1" max="3650">
          <button type="submit">Create token</button>
        </form></div>`;
    return sendPage(reply, { title: 'Tokens', body, user });
  }

  app.get('/account', { schema: hidden, config: { auth: sessionOnly } }, (request, reply) => accountPage(request, reply));

  app.post('/account/tokens', { schema: { ...hidden, body: tokenBody }, config: { auth: sessionOnly }, onRequest: tokenLimit }, async (request, reply) => {
    const { name, scopes, expires_in_days: days } = request.body;
    let created: { name: string; token: string; callbackSecret: string };
    try {
      const { token, record, callbackSecret } = await accounts.createPersonalToken(userOf(request).id, {
        name,
        scopes: ([] as string[]).concat(scopes ?? []),
        ...(typeof days === 'number' ? { expiresInDays: days } : {}),
      });
      created = { name: record.name, token, callbackSecret };
    } catch (err) {
      if (err instanceof AppError && err.reason === 'validation_failed') return accountPage(request, reply.code(422), undefined, err.message);
      throw err;
    }
    return accountPage(request, reply.code(201), created);
  });

  // The built-in generator of the speech token API's token (POST /api/account/tokens/speech-api's rules).
  app.post(
    '/account/tokens/speech-api',
    { schema: { ...hidden, body: z.object(csrfField).optional() }, config: { auth: sessionOnly }, onRequest: tokenLimit },
    async (request, reply) => {
      let created: { name: string; token: string; callbackSecret: string; revoked: number };
      try {
        const { token, record, callbackSecret, revokedTokenIds } = await accounts.generateSpeechApiToken(userOf(request).id);
        created = { name: record.name, token, callbackSecret, revoked: revokedTokenIds.length };
      } catch (err) {
        if (err instanceof AppError && err.reason === 'forbidden') return accountPage(request, reply.code(403), undefined, undefined, err.message);
        throw err;
      }
      return accountPage(request, reply.code(201), created);
    },
  );

  const revokeParams = z.object({ tokenId: idParam() });
  app.post(
    '/account/tokens/:tokenId/revoke',
    { schema: { ...hidden, params: revokeParams, body: z.object(csrfField).optional() }, config: { auth: sessionOnly }, onRequest: tokenLimit },
    async (request, reply) => {
      await accounts.revokePersonalToken(request.params.tokenId, { ownerId: userOf(request).id });
      return reply.redirect('/account', 303);
    },
  );
}
