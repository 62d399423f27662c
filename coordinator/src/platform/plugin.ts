import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { platformSchema } from '@sonar/shared';
import type { OutboundPolicy } from '@sonar/shared';
import { installDomainErrors, okReasonBody } from '../http/errors.js';
import { FeedResolver } from './rss/feed-resolver.js';
import { rssRoutes } from './rss/rss-routes.js';

/** Platform endpoints (spec group E): the public version, and RSS source resolution. */
export async function platformPlugin(app: FastifyInstance, opts: { version: string; outbound: OutboundPolicy }) {
  installDomainErrors(app, okReasonBody);
  await rssRoutes(app, new FeedResolver(opts.outbound));
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
