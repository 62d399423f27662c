import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { speechRateLimit } from './policy.js';

const speechManager: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.manage'] };

/** `POST /api/speech/run-now`: the queue manager's "process the queue now" helper. */
export async function runNowRoute(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech' | 'workers'>) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { jobs } = deps.speech;

  r.post('/api/speech/run-now', {
    config: { auth: speechManager, rateLimit: speechRateLimit(deps.config) },
    schema: {
      tags: ['speech'],
      security: [{ session: [] }, { bearerJwt: [] }],
      summary: 'Managers: wake the workers now, optionally queueing failed jobs again first',
      description:
        'Jobs are processed asynchronously by workers; this helper does not run a job inside the request. With ' +
        '`reset_failed: true` the oldest `limit` failed jobs (by submission time, any user) are queued again exactly like ' +
        '`POST /api/speech/jobs/{jobId}/restart`: status `queued`, attempt 0, failure cleared, a `restarted` entry in the ' +
        'runtime log (uploads whose media was released are skipped). Without it nothing changes in the queue. Either ' +
        'way every worker waiting in a claim long-poll is woken to claim eligible work at once. The response reports ' +
        '`requeued` (jobs queued again by this call), `queued` (jobs waiting now, all users and channels) and ' +
        '`workers_fresh` (registered workers with fresh presence, that is, able to claim now; 0 means queued jobs wait ' +
        'until a worker connects). Needs `speech.manage` (administrators bypass). From a browser session the request ' +
        'needs the `X-CSRF-Token` header.',
      body: z
        .object({
          limit: z.coerce.number().int().min(1).max(100).default(1).describe('How many failed jobs to queue again: 1 to 100, default 1'),
          reset_failed: z
            .union([z.boolean(), z.enum(['0', '1', 'true', 'false'])])
            .optional()
            .transform((v) => v === true || v === '1' || v === 'true')
            .describe('Queue the oldest `limit` failed jobs again before waking the workers'),
        })
        .describe('Optional; an empty body wakes the workers only'),
      response: {
        200: z.object({
          ok: z.literal(true),
          message: z.string(),
          requeued: z.number().int().describe('Failed jobs queued again by this call'),
          queued: z.number().int().describe('Jobs waiting in the queue now (all users and channels)'),
          workers_fresh: z.number().int().describe('Workers with fresh presence'),
        }),
        401: errorBodySchema,
        403: errorBodySchema,
        422: errorBodySchema,
        429: errorBodySchema,
      },
    },
    // No body at all is the same as {}.
    preValidation: async (request) => {
      const raw = request as { body: unknown };
      raw.body ??= {};
    },
    handler: async (request) => {
      const user = userOf(request);
      const { limit, reset_failed } = request.body;
      const requeued = reset_failed ? await jobs.requeueFailed(user, limit) : [];
      jobs.wakeWorkers();
      const [queued, workers] = await Promise.all([jobs.queuedCount(), deps.workers.listWorkers()]);
      const fresh = workers.filter((w) => w.fresh).length;
      request.log.info({ requeued, queued, workersFresh: fresh }, 'speech run-now');
      const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
      return {
        ok: true as const,
        message: `${reset_failed ? `Queued ${plural(requeued.length, 'failed job')} again. ` : ''}Woke the workers: ${plural(queued, 'job')} queued, ${plural(fresh, 'worker')} online.`,
        requeued: requeued.length,
        queued,
        workers_fresh: fresh,
      };
    },
  });
}
