import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { platformSchema } from '@sonar/shared';
import { installDomainErrors, okReasonBody } from '../http/errors.js';

/** Platform metadata: the public semantic version and nothing about framework or runtime. */
export async function platformPlugin(app: FastifyInstance, opts: { version: string }) {
  installDomainErrors(app, okReasonBody);
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
