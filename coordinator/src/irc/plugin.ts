import type { FastifyInstance } from 'fastify';
import { installDomainErrors, successErrorBody } from '../http/errors.js';
import type { DomainDeps } from '../app.js';

/** Chat-log archive (/irc/api): errors are `{success:false, error}`. */
export async function ircPlugin(app: FastifyInstance, _deps: DomainDeps) {
  installDomainErrors(app, successErrorBody);
}
