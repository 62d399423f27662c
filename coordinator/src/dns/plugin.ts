import type { FastifyInstance } from 'fastify';
import type { DnsDeps } from '../deps.js';
import { installDomainErrors, okReasonBody } from '../http/errors.js';
import { sharedRateLimit } from '../http/rate-limits.js';
import { DnsService } from './dns-service.js';
import { dnsRoutes } from './routes.js';

/** DNS zone editor API (/api/dns): errors are `{ok:false, reason}`; validation failures are 400. */
export async function dnsPlugin(app: FastifyInstance, deps: DnsDeps) {
  installDomainErrors(app, okReasonBody, { validation_failed: 400 });
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
