import type { FastifyInstance } from 'fastify';
import type { DnsDeps } from '../deps.js';
import { normalizeError, okReasonBody, sendError } from '../http/errors.js';
import { sharedRateLimit } from '../http/rate-limits.js';
import { DnsService } from './dns-service.js';
import { mapMasterFailure } from './master-errors.js';
import { dnsRoutes } from './routes.js';

/** DNS zone editor API (/api/dns): errors are `{ok:false, reason}`; validation failures are 400. */
export async function dnsPlugin(app: FastifyInstance, deps: DnsDeps) {
  // The master-client failures no service method mapped (an unreachable master: 503 + Retry-After) first.
  app.setErrorHandler((error, request, reply) => sendError(reply, normalizeError(mapMasterFailure(error), request, { validation_failed: 400 }), okReasonBody));
  const { config, accounts } = deps;
  // Every DNS route counts against one budget per client (before authentication: failed keys count too).
  app.addHook('onRequest', sharedRateLimit(app, 'dns', config.DNS_RATE_LIMIT_PER_MINUTE));
  const dns = new DnsService(deps.orm, config);
  app.decorate('dns', dns);
  await dnsRoutes(app, { config, accounts, dns });
}

declare module 'fastify' {
  interface FastifyInstance {
    dns: DnsService;
  }
}
