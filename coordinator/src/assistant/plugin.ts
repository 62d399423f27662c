import type { FastifyInstance } from 'fastify';
import { installDomainErrors, okReasonBody, sendError, normalizeError } from '../http/errors.js';
import type { DomainDeps } from '../deps.js';
import { AssistantService } from './assistant-service.js';
import { AssistantError } from './errors.js';
import { assistantPages } from './pages.js';
import { assistantRoutes } from './routes.js';
import type { Reason } from '@sonar/shared';

const REASONS: Record<AssistantError['status'], Reason> = {
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  422: 'validation_failed',
  429: 'rate_limited',
  502: 'bad_gateway',
  503: 'service_unavailable',
};

/** The `{ok:false, reason, message}` body of a connector error, with its code, links and missing scopes. */
export function assistantErrorBody(err: AssistantError) {
  const { retry_after: _retry, ...extra } = err.extra;
  return { ok: false as const, reason: REASONS[err.status], message: err.message, code: err.code, ...extra };
}

/** Organization assistant connector (/api/ai/assistant, /admin/assistant). */
export async function assistantPlugin(app: FastifyInstance, deps: DomainDeps) {
  installDomainErrors(app, okReasonBody);
  const service = new AssistantService({ orm: deps.orm, redis: deps.redis, config: deps.config, log: app.log });
  app.addHook('onClose', () => service.close());
  await app.register(async (api) => {
    api.setErrorHandler((error, request, reply) => {
      if (error instanceof AssistantError) {
        if (error.extra.retry_after) void reply.header('retry-after', String(error.extra.retry_after));
        return reply.code(error.status).type('application/json; charset=utf-8').serializer(JSON.stringify).send(assistantErrorBody(error));
      }
      return sendError(reply, normalizeError(error, request), okReasonBody);
    });
    await assistantRoutes(api, service);
  });
  await app.register(async (pages) => assistantPages(pages, service));
}
