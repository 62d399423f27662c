import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import { IGNORED_FIELDS, type AssistantService } from './assistant-service.js';
import { assistantErrorSchema, auditQuery, auditRowSchema, respondBody, respondResponse, statusResponse } from './schemas.js';

/** A personal access token with scope ai.assistant, of a user who holds the permission (both are required). */
const assistantToken: AuthRequirement = { accept: ['personal_token'], scope: 'ai.assistant', permissions: ['ai.assistant'] };
const signedIn: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['ai.assistant'] };
const admin: AuthRequirement = { accept: ['session', 'jwt'], adminOnly: true };
/** Per client address, before authentication; the per-user budget (ASSISTANT_RATE_LIMIT_PER_MINUTE) follows it. */
const ADDRESS_RATE_LIMIT = { max: 300, timeWindow: '1 minute' };
const tags = ['assistant'];
const e = assistantErrorSchema;

export async function assistantRoutes(app: FastifyInstance, service: AssistantService) {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post('/api/ai/assistant/respond', {
    config: { auth: assistantToken, rateLimit: ADDRESS_RATE_LIMIT },
    schema: {
      tags,
      security: [{ personalToken: [] }],
      summary: 'Ask the organization’s assistant, on behalf of your connected work or school account',
      description:
        '`Authorization: Bearer` with a personal access token of scope `ai.assistant`; the token’s user and that user’s delegated ' +
        'connection (made on `/admin/assistant`) are used. The request goes to the graph API (`POST {graph_url}/beta/assistant/conversations`, ' +
        'then `…/conversations/{id}/chat`); success needs a real assistant reply. There is no fallback to any other AI provider. ' +
        '`model`, `temperature`, `top_p`, `max_tokens`, `max_output_tokens`, `reasoning` and `reasoning_effort` have no effect (listed in ' +
        '`diagnostics.ignored_fields`). Errors: 401 user not identified; 403 access, token validation (personal account, wrong audience, ' +
        '`missing_scopes`), licence missing or `connector_slug` by a non-administrator; 409 no account connected or it must be reconnected ' +
        '(`reconnect_url`); 422 invalid request; 429 over the per-user budget; 502 the upstream was unreachable, timed out or answered unusably.',
      body: respondBody,
      response: { 200: respondResponse, 401: e, 403: e, 409: e, 422: e, 429: e, 502: e, 503: e },
    },
    handler: async (request) => {
      const body = request.body as Record<string, unknown>;
      const ignored = IGNORED_FIELDS.filter((f) => body[f] !== undefined);
      return service.respond(userOf(request), { ...request.body, ignored }, { requestId: request.id });
    },
  });

  r.get('/api/ai/assistant/status', {
    config: { auth: signedIn, rateLimit: ADDRESS_RATE_LIMIT },
    schema: {
      tags,
      security: [{ session: [] }, { bearerJwt: [] }],
      summary: 'Tenant setups you may use and your connections with their last validation',
      description: 'Administrators see every setup with its delegates; other users the setups delegated to them. Credentials are never shown.',
      response: { 200: statusResponse, 401: e, 403: e },
    },
    handler: async (request) => {
      const user = userOf(request);
      return { ok: true as const, setups: await service.setupsFor(user), connections: await service.connectionsOf(user) };
    },
  });

  r.get('/api/ai/assistant/audit', {
    config: { auth: admin, rateLimit: ADDRESS_RATE_LIMIT },
    schema: {
      tags,
      security: [{ session: [] }, { bearerJwt: [] }],
      summary: 'The assistant audit log (administrators)',
      description:
        'Connects, refreshes, validations and assistant requests, newest first, with action, result, user, tenant, correlation and ' +
        'request ids and error codes. It never holds OAuth state, authorization codes, tokens or secrets. Page with `before_id`.',
      querystring: auditQuery,
      response: { 200: z.object({ ok: z.literal(true), entries: z.array(auditRowSchema) }), 401: e, 403: e, 422: e },
    },
    handler: async (request) => {
      const q = request.query;
      return { ok: true as const, entries: await service.audit.list({ limit: q.limit, action: q.action, userId: q.user_id, beforeId: q.before_id }) };
    },
  });
}
