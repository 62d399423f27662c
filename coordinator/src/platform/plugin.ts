import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { platformSchema } from '@sonar/shared';
import type { OutboundPolicy } from '@sonar/shared';
import { installDomainErrors, okReasonBody } from '../http/errors.js';
import { FeedResolver } from './rss/feed-resolver.js';
import { rssRoutes } from './rss/rss-routes.js';
import { SpamService } from './spam/spam-service.js';
import { spamRoutes } from './spam/spam-routes.js';
import { statusPagePlugin } from './statuspage/plugin.js';
import { guestbookPlugin } from './guestbook/plugin.js';
import type { Orm } from '../db/orm.js';
import type { Config } from '../config.js';
import type { AccountService } from '../accounts/account-service.js';
import { DnsService } from '../dns/dns-service.js';
import { DyndnsService } from './dyndns/dyndns-service.js';
import { dyndnsRoutes } from './dyndns/dyndns-routes.js';
import type { DyndnsTokens } from './dyndns/dyndns-tokens.js';
import { DnsblClient, parseBlocklists } from './reputation/dnsbl.js';
import { ReputationService } from './reputation/reputation-service.js';
import { reputationRoutes } from './reputation/reputation-routes.js';

/** Platform endpoints: the public version, RSS source resolution, spam scoring, dynamic DNS, reputation, status pages and guestbooks. */
export async function platformPlugin(
  app: FastifyInstance,
  opts: { version: string; outbound: OutboundPolicy; orm: Orm; config: Config; accounts: AccountService; dyndnsTokens: DyndnsTokens },
) {
  installDomainErrors(app, okReasonBody);
  await rssRoutes(app, new FeedResolver(opts.outbound));
  const spam = new SpamService(opts.orm, opts.config);
  await spamRoutes(app, spam);
  await dyndnsRoutes(app, new DyndnsService(opts.dyndnsTokens, new DnsService(opts.orm, opts.config), opts.accounts, opts.config), opts.config);
  const dnsbl = new DnsblClient(parseBlocklists(opts.config.REPUTATION_DNSBLS), opts.config.REPUTATION_DNS_RESOLVER, opts.config.REPUTATION_DNS_TIMEOUT_MS);
  await reputationRoutes(app, new ReputationService(opts.orm, dnsbl, opts.config));
  await statusPagePlugin(app, { orm: opts.orm, publicBaseUrl: opts.config.PUBLIC_BASE_URL });
  await guestbookPlugin(app, { orm: opts.orm, spam });
  app.withTypeProvider<ZodTypeProvider>().get('/api/platform', {
    config: { auth: 'public' },
    schema: {
      tags: ['platform'],
      summary: 'Public platform version',
      description: 'Clients should cache this; it changes only with a release.',
      response: { 200: platformSchema },
    },
    handler: async (_request, reply) => {
      void reply.header('cache-control', 'public, max-age=300');
      return { ok: true as const, version: opts.version };
    },
  });
}
