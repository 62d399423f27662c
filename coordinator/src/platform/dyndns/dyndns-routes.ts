import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formBody from '@fastify/formbody';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema, formatStockholm, safeString, idParam } from '@sonar/shared';
import { principalOf, userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import type { Config } from '../../config.js';
import { normalizeError, type NormalizedError } from '../../http/errors.js';
import { html } from '../../http/html.js';
import { pageErrorHandler, sendPage } from '../../http/page.js';
import { sharedRateLimit } from '../../http/rate-limits.js';
import { MAX_HOSTS_PER_TOKEN, parseAddresses, type DyndnsService } from './dyndns-service.js';
import type { DyndnsToken } from './dyndns-token-repository.js';

/** OpenAPI: the token routes take a browser session or a JWT (config.auth `manager`). */
const signedInSecurity: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];

/** dyndns2 clients: the token as the password of HTTP Basic auth (any user name). */
const updater: AuthRequirement = { accept: ['dyndns_token'] };
/** Tokens are managed by their owner, from the browser or with a JWT. */
const manager: AuthRequirement = { accept: ['session', 'jwt'] };
const page: AuthRequirement = { accept: ['session'] };
const RATE_LIMIT = { max: 60, timeWindow: '1 minute' };
const tags = ['platform'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };

/** Update paths: the canonical one, the bare `/api/dyndns` and the conventional dyndns2 alias. */
export const DYNDNS_UPDATE_PATHS = ['/api/dyndns/update', '/api/dyndns', '/nic/update'] as const;

const updateQuery = z.object({
  hostname: z.string().max(5000).optional().describe('Comma-separated fully qualified host names (at most 20)'),
  myip: z.string().max(200).optional().describe('IPv4 and/or IPv6 address, comma-separated; omitted or empty: the client address'),
  myipv6: z.string().max(100).optional().describe('IPv6 address (No-IP style); alternative to an IPv6 address in `myip`'),
  system: z.string().max(50).optional().describe('Ignored (ddclient sends `dyndns`)'),
  wildcard: z.string().max(10).optional().describe('Ignored'),
  mx: z.string().max(253).optional().describe('Ignored'),
  backmx: z.string().max(10).optional().describe('Ignored'),
  offline: z.string().max(10).optional().describe('Ignored'),
});

const tokenBody = z.object({
  name: safeString().trim().min(1).max(100),
  hostnames: z
    .array(z.string().min(1).max(253))
    .min(1)
    .max(MAX_HOSTS_PER_TOKEN)
    .describe('Fully qualified host names inside zones you may write (not the zone apex)'),
});

const tokenSchema = z.object({
  id: z.number().int(),
  name: z.string(),
  prefix: z.string().describe('The first characters of the secret, to recognise it'),
  hostnames: z.array(z.string()),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
});

const present = (t: DyndnsToken) => ({
  id: t.id,
  name: t.name,
  prefix: t.prefix,
  hostnames: t.hostnames,
  created_at: t.createdAt.toISOString(),
  last_used_at: t.lastUsedAt ? t.lastUsedAt.toISOString() : null,
});

const idParams = z.object({ id: idParam() });

/**
 * The dyndns2 area's one error path: plain text as dyndns2 clients read it. 401/403 `badauth`
 * (with a Basic challenge), 429 `abuse` (request rate, Retry-After), 5xx `911`, other 4xx
 * `badrequest` followed by one `field: message` line per field error.
 */
function sendDyndnsError(reply: FastifyReply, e: NormalizedError) {
  if (e.headers) void reply.headers(e.headers);
  let code = 'badrequest';
  if (e.status === 401 || e.status === 403) {
    code = 'badauth';
    void reply.header('www-authenticate', 'Basic realm="sonar dyndns", charset="UTF-8"');
  } else if (e.status === 429) code = 'abuse';
  else if (e.status >= 500) code = '911';
  // Values the request sent are echoed in the messages: control characters (a NUL, a line break
  // that would forge another line) are written as \uXXXX escapes, never sent raw.
  const details = code === 'badrequest' ? Object.entries(e.errors ?? { request: [e.message] }).map(([f, m]) => printable(`${f}: ${m.join('; ')}`)) : [];
  return reply
    .code(e.status)
    .type('text/plain; charset=utf-8')
    .send([code, ...details].join('\n') + '\n');
}

/** Text with its control characters (C0, DEL, C1, line and paragraph separators) as `\uXXXX` escapes. */
function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `/api/dyndns`: the dyndns2 update routes, the token API and the /dyndns page. */
export async function dyndnsRoutes(app: FastifyInstance, dyndns: DyndnsService, config: Config) {
  await app.register(async (scope) => {
    scope.setErrorHandler((error, request, reply) => sendDyndnsError(reply, normalizeError(error, request, { validation_failed: 400 })));
    // One budget per client address over the three paths (before authentication: failed tokens count too).
    scope.addHook('onRequest', sharedRateLimit(scope, 'dyndns', config.DYNDNS_RATE_LIMIT_PER_MINUTE));
    const r = scope.withTypeProvider<ZodTypeProvider>();
    for (const path of DYNDNS_UPDATE_PATHS) {
      r.get(path, {
        config: { auth: updater },
        schema: {
          tags,
          security: [{ dyndnsBasic: [] }],
          summary: path === '/api/dyndns/update' ? 'Dynamic DNS update (dyndns2)' : `Dynamic DNS update (alias of /api/dyndns/update)`,
          description:
            'The dyndns2 protocol of ddclient, inadyn and routers. HTTP Basic auth: any user name, a dynamic-DNS token as the ' +
            'password. Each named host must be one of the token’s; its A record is set to the IPv4 address and its AAAA ' +
            'record to the IPv6 address (`myip` may hold one of each, comma-separated, or `myipv6` the IPv6 one; with ' +
            'neither the client address is used, behind a proxy as TRUST_PROXY allows). The answer is text/plain, one line per ' +
            'host in order: `good <ip>`, `nochg <ip>` (already so), `nohost` (not this token’s, or its owner lost write access), ' +
            '`notfqdn`, `abuse` (blocked after repeated identical updates), `dnserr` (the master refused the data, e.g. a ' +
            'CNAME there), `911` (DNS master unreachable; retry later); `numhost` alone for more than 20 hosts. Request errors ' +
            'are 401 `badauth`, 429 `abuse`, 400 `badrequest` with `field: message` lines, 503 `911`.',
          querystring: updateQuery,
          response: {
            200: z.string().describe('text/plain, one dyndns2 answer line per host'),
            400: z.string(),
            401: z.string(),
            429: z.string(),
            503: z.string(),
          },
        },
        handler: async (request, reply) => {
          const principal = principalOf(request);
          if (principal.via !== 'dyndns_token') return sendDyndnsError(reply, normalizeError(new Error('no token'), request));
          const ips = parseAddresses(request.query.myip, request.query.myipv6, request.ip);
          const lines = await dyndns.update(principal.user, principal.tokenId, request.query.hostname, ips);
          return reply
            .header('cache-control', 'no-store')
            .type('text/plain; charset=utf-8')
            .send(lines.join('\n') + '\n');
        },
      });
    }
  });

  const r = app.withTypeProvider<ZodTypeProvider>();
  r.get('/api/dyndns/tokens', {
    config: { auth: manager, rateLimit: RATE_LIMIT },
    schema: {
      tags,
      security: signedInSecurity,
      summary: 'Your dynamic-DNS tokens',
      description: 'Secrets are never shown again after creation.',
      response: { 200: z.object({ ok: z.literal(true), tokens: z.array(tokenSchema) }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, tokens: (await dyndns.listTokens(userOf(request))).map(present) }),
  });

  r.post('/api/dyndns/tokens', {
    config: { auth: manager, rateLimit: RATE_LIMIT },
    schema: {
      tags,
      security: signedInSecurity,
      summary: 'Create a dynamic-DNS token',
      description:
        'Every host name must lie inside a zone you may write (administrators: any managed zone). The secret (`sonar_ddns_…`) ' +
        'is in this answer only; only its hash is stored. From a browser session the request needs `X-CSRF-Token`.',
      body: tokenBody,
      response: { 201: z.object({ ok: z.literal(true), token: z.string(), dyndns_token: tokenSchema }), ...errors },
    },
    handler: async (request, reply) => {
      const { secret, token } = await dyndns.createToken(userOf(request), request.body.name, request.body.hostnames);
      return reply.code(201).send({ ok: true as const, token: secret, dyndns_token: present(token) });
    },
  });

  r.delete('/api/dyndns/tokens/:id', {
    config: { auth: manager, rateLimit: RATE_LIMIT },
    schema: {
      tags,
      security: signedInSecurity,
      summary: 'Revoke a dynamic-DNS token',
      params: idParams,
      response: { 200: z.object({ ok: z.literal(true) }), ...errors },
    },
    handler: async (request) => {
      await dyndns.revokeToken(userOf(request), request.params.id);
      return { ok: true as const };
    },
  });

  await app.register(async (pages) => {
    await pages.register(formBody);
    pages.setErrorHandler((error, request, reply) => pageErrorHandler(request, reply, normalizeError(error, request)));
    const p = pages.withTypeProvider<ZodTypeProvider>();
    const hidden = { hide: true } as const;

    const render = async (request: FastifyRequest, reply: FastifyReply, status: number, opts: { error?: string; secret?: string } = {}) => {
      const user = userOf(request);
      const csrf = reply.generateCsrf();
      const tokens = await dyndns.listTokens(user);
      const rows = tokens.map(
        (t) => html`<tr data-token="${t.id}"><td><strong>${t.name}</strong><br><span class="muted">${t.prefix}…</span></td><td>${t.hostnames.join(', ')}</td>
          <td>${t.lastUsedAt ? formatStockholm(t.lastUsedAt) : 'never'}</td>
          <td><form method="post" action="/dyndns/tokens/${t.id}/revoke" data-confirm="Revoke ${t.name}? Clients using it get badauth at once."><input type="hidden" name="_csrf" value="${csrf}"><button class="danger" type="submit">Revoke</button></form></td></tr>`,
      );
      const body = html`${opts.secret ? html`<div class="card notice" role="status" id="dyndns-secret"><p>New token (shown once): <code>${opts.secret}</code></p></div>` : ''}
        <div class="card"><h1>Dynamic DNS</h1>
        <p class="muted">Tokens for ddclient, inadyn and routers (dyndns2): server this host, path <code>/nic/update</code>, any user name, the token as password.</p>
        ${
          rows.length
            ? html`<div class="table-wrap"><table id="dyndns-tokens"><thead><tr><th>Token</th><th>Host names</th><th>Last used</th><th></th></tr></thead><tbody>${rows}</tbody></table></div>`
            : html`<p id="no-dyndns-tokens">No dynamic-DNS token yet.</p>`
        }</div>
        <div class="card"><h2>New token</h2>${opts.error ? html`<p class="error" role="alert" id="dyndns-error">${opts.error}</p>` : ''}
        <form method="post" action="/dyndns/tokens"><input type="hidden" name="_csrf" value="${csrf}">
          <label for="dyndns-name">Name</label><input id="dyndns-name" name="name" maxlength="100" required>
          <label for="dyndns-hosts">Host names (comma-separated, inside zones you may change)</label><input id="dyndns-hosts" name="hostnames" maxlength="5000" required>
          <button type="submit">Create</button></form></div>`;
      return sendPage(reply.code(status), { title: 'Dynamic DNS', user, active: 'dns', body });
    };

    p.get('/dyndns', { schema: hidden, config: { auth: page } }, (request, reply) => render(request, reply, 200));
    p.post(
      '/dyndns/tokens',
      {
        schema: {
          ...hidden,
          body: z.object({ _csrf: z.string().max(200).optional(), name: z.string().max(100).default(''), hostnames: z.string().max(5000).default('') }),
        },
        config: { auth: page },
      },
      async (request, reply) => {
        const hostnames = request.body.hostnames
          .split(/[\s,]+/)
          .map((s) => s.trim())
          .filter(Boolean);
        const parsed = tokenBody.safeParse({ name: request.body.name, hostnames });
        if (!parsed.success)
          return render(request, reply, 422, { error: parsed.error.issues.map((i) => `${i.path.join('.') || 'form'}: ${i.message}`).join('; ') });
        try {
          const { secret } = await dyndns.createToken(userOf(request), parsed.data.name, parsed.data.hostnames);
          return await render(request, reply, 201, { secret });
        } catch (err) {
          const e = normalizeError(err, request);
          if (e.status === 422)
            return render(request, reply, 422, {
              error:
                Object.values(e.errors ?? {})
                  .flat()
                  .join('; ') || e.message,
            });
          throw err;
        }
      },
    );
    p.post(
      '/dyndns/tokens/:id/revoke',
      { schema: { ...hidden, params: idParams, body: z.object({ _csrf: z.string().max(200).optional() }).optional() }, config: { auth: page } },
      async (request, reply) => {
        await dyndns.revokeToken(userOf(request), request.params.id);
        return reply.redirect('/dyndns', 303);
      },
    );
  });
}
