import type { FastifyInstance } from 'fastify';
import { installDomainErrors, successErrorBody } from '../http/errors.js';
import type { DomainDeps } from '../app.js';
import { IrcArchiveService } from './archive-service.js';
import { ircRoutes } from './routes.js';

/** Chat-log archive (/irc/api, legacy /api/irclog): public reads; errors are `{success:false, error}`. */
export async function ircPlugin(app: FastifyInstance, deps: DomainDeps) {
  installDomainErrors(app, successErrorBody);
  await app.register(ircRoutes, { archive: new IrcArchiveService(deps.orm), rateLimitMax: deps.config.IRC_API_RATE_LIMIT_MAX });
}
