import type { FastifyInstance } from 'fastify';
import { installDomainErrors, okReasonBody } from '../http/errors.js';
import type { DomainDeps } from '../app.js';

/** DNS zone editor API (/api/dns): errors are `{ok:false, reason}`; validation failures are 400. */
export async function dnsPlugin(app: FastifyInstance, _deps: DomainDeps) {
  installDomainErrors(app, okReasonBody, { validation_failed: 400 });
}
