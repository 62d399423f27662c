import type { FastifyInstance } from 'fastify';
import { installDomainErrors, successErrorBody } from '../http/errors.js';
import type { IrcDeps } from '../deps.js';
import { ircAdminRoutes } from './admin-routes.js';
import { IrcArchiveChanges } from './archive-changes.js';
import { IrcArchiveService } from './archive-service.js';
import { ircReaderPages } from './reader/pages.js';
import { IrcReaderStore } from './reader/reader-repository.js';
import { IRC_API_PREFIXES, ircRoutes } from './routes.js';

/**
 * Chat-log archive: public reads under /irc/api (legacy /api/irclog), the admin alias table, and
 * the public reader pages under /irc. API errors are `{success:false, error}`; the pages answer
 * with the console's HTML error page.
 */
export async function ircPlugin(app: FastifyInstance, deps: IrcDeps) {
  installDomainErrors(app, successErrorBody);
  const archive = new IrcArchiveService(deps.orm, {
    queryTimeoutMs: deps.config.IRC_QUERY_TIMEOUT_MS,
    cache: { maxBytes: deps.config.IRC_SEARCH_CACHE_MB * 1024 * 1024, ttlMs: deps.config.IRC_SEARCH_CACHE_TTL_SECONDS * 1000 },
  });
  // Writes on other coordinators (and their answers' cache) arrive over Redis; this one's go out there.
  const disconnect = await IrcArchiveChanges.of(deps.orm).connect(deps.redis, `${deps.config.REDIS_KEY_PREFIX}irc:archive-changed`, app.log);
  app.addHook('onClose', disconnect);
  await app.register(ircRoutes, { archive, rateLimitMax: deps.config.IRC_API_RATE_LIMIT_MAX });
  await app.register(ircAdminRoutes, { aliases: archive.aliases, rateLimitMax: deps.config.ADMIN_RATE_LIMIT_PER_MINUTE });
  await app.register(ircReaderPages, {
    archive,
    store: new IrcReaderStore(deps.orm, deps.config.IRC_QUERY_TIMEOUT_MS),
    rateLimitMax: deps.config.IRC_API_RATE_LIMIT_MAX,
  });
}

/** Whether a request URL belongs to the chat-log API (its 404s answer `{success:false, error}` too). */
export function isIrcApiUrl(url: string): boolean {
  return IRC_API_PREFIXES.some((prefix) => url.startsWith(prefix));
}
