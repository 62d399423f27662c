import type { FastifyInstance } from 'fastify';
import { installDomainErrors, successErrorBody } from '../http/errors.js';
import type { IrcDeps } from '../deps.js';
import { ircAdminRoutes } from './admin-routes.js';
import { IrcArchiveService } from './archive-service.js';
import { IRC_API_PREFIXES, ircRoutes } from './routes.js';

/**
 * Chat-log archive: public reads under /irc/api (legacy /api/irclog) and the admin alias table.
 * Errors are `{success:false, error}`.
 */
export async function ircPlugin(app: FastifyInstance, deps: IrcDeps) {
  installDomainErrors(app, successErrorBody);
  const archive = new IrcArchiveService(deps.orm, { queryTimeoutMs: deps.config.IRC_QUERY_TIMEOUT_MS });
  await app.register(ircRoutes, { archive, rateLimitMax: deps.config.IRC_API_RATE_LIMIT_MAX });
  await app.register(ircAdminRoutes, { aliases: archive.aliases, rateLimitMax: deps.config.ADMIN_RATE_LIMIT_PER_MINUTE });
}

/** Whether a request URL belongs to the chat-log API (its 404s answer `{success:false, error}` too). */
export function isIrcApiUrl(url: string): boolean {
  return IRC_API_PREFIXES.some((prefix) => url.startsWith(prefix));
}
