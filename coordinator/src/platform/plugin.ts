import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { errorBodySchema, platformSchema } from '@sonar/shared';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { OutboundPolicy } from '@sonar/shared';
import { AppError, installDomainErrors, okReasonBody } from '../http/errors.js';
import { readiness } from './readiness.js';
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
import type { DyndnsTokens } from './dyndns/dyndns-token-repository.js';
import { DnsblClient, parseBlocklists } from './reputation/dnsbl.js';
import { ReputationService } from './reputation/reputation-service.js';
import { reputationRoutes } from './reputation/reputation-routes.js';

/** Platform endpoints: the public version, RSS source resolution, spam scoring, dynamic DNS, reputation, status pages and guestbooks. */
export async function platformPlugin(
  app: FastifyInstance,
  opts: { version: string; outbound: OutboundPolicy; orm: Orm; redis: Redis; config: Config; accounts: AccountService; dyndnsTokens: DyndnsTokens },
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
  app.withTypeProvider<ZodTypeProvider>().get('/api/platform/ready', {
    config: { auth: 'public' },
    schema: {
      tags: ['platform'],
      summary: 'Readiness: PostgreSQL and Redis answer',
      description:
        'The probe a load balancer should use to send traffic here: 200 when this coordinator reaches PostgreSQL and Redis ' +
        '(each asked once, given `DATABASE_WAIT_TIMEOUT_MS`), else 503 `service_unavailable` naming what does not answer. ' +
        '`GET /api/platform` is the liveness probe (the process answers; it touches neither). Never cached.',
      response: { 200: readinessSchema, 503: errorBodySchema },
    },
    handler: async (_request, reply) => {
      void reply.header('cache-control', 'no-store');
      const r = await readiness(opts.orm, opts.redis, opts.config.DATABASE_WAIT_TIMEOUT_MS);
      const down = [r.postgres !== 'ok' ? 'PostgreSQL' : null, r.redis !== 'ok' ? 'Redis' : null].filter((x) => x !== null);
      if (down.length) throw new AppError('service_unavailable', `Not ready: ${down.join(' and ')} ${down.length > 1 ? 'do' : 'does'} not answer.`);
      return { ok: true as const, postgres: 'ok' as const, redis: 'ok' as const };
    },
  });
}

const readinessSchema = z.object({ ok: z.literal(true), postgres: z.literal('ok'), redis: z.literal('ok') });
