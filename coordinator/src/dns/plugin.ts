import type { FastifyInstance } from 'fastify';
import type { DnsDeps } from '../deps.js';
import { normalizeError, okReasonBody, sendError } from '../http/errors.js';
import { sharedRateLimit } from '../http/rate-limits.js';
import { DnsService } from './dns-service.js';
import { mapMasterFailure } from './master-errors.js';
import { dnsPages } from './pages.js';
import { dnsRoutes } from './routes.js';

/**
 * DNS: the zone editor API (/api/dns: errors are `{ok:false, reason}`, validation failures 400, one
 * rate-limit budget) and the editor pages (/dns, with the console's HTML error pages), each in its
 * own scope over one DnsService.
 */
export async function dnsPlugin(app: FastifyInstance, deps: DnsDeps) {
  const { config, accounts } = deps;
  const dns = new DnsService(deps.orm, config);
  app.decorate('dns', dns);
  // A refresh drops the partition it replaced after answering; closing waits for those drops.
  app.addHook('onClose', () => dns.cache.settled());
  await app.register(async (api) => {
    // The master-client failures no service method mapped (an unreachable master: 503 + Retry-After) first.
    api.setErrorHandler((error, request, reply) =>
      sendError(reply, normalizeError(mapMasterFailure(error), request, { validation_failed: 400 }), okReasonBody),
    );
    // Every DNS route counts against one budget per client (before authentication: failed keys count too).
    api.addHook('onRequest', sharedRateLimit(api, 'dns', config.DNS_RATE_LIMIT_PER_MINUTE));
    await dnsRoutes(api, { config, accounts, dns });
  });
  await app.register(async (pages) => dnsPages(pages, { config, accounts, dns }));
}

declare module 'fastify' {
  interface FastifyInstance {
    dns: DnsService;
  }
}
