import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import type { AuthRequirement } from '../../accounts/types.js';
import { AppError } from '../../http/errors.js';
import { FeedResolver, SourceFetchError } from './feed-resolver.js';

const signedIn: AuthRequirement = { accept: ['session', 'jwt'] };
/** Each resolution fetches up to nine URLs from the internet: 30 a minute per client is plenty for a feed reader's "add source" box. */
const RATE_LIMIT = { max: 30, timeWindow: '1 minute' };

const feedSchema = z.object({
  url: z.string().describe('The feed URL (after redirects)'),
  type: z.enum(['rss', 'atom', 'rdf', 'json']).describe('RSS 2.0/0.9x, Atom, RSS 1.0 (RDF) or JSON Feed'),
  title: z.string().nullable(),
  site_url: z.string().nullable().describe('The site the feed belongs to, as the feed says'),
  item_count: z.number().int(),
});

const responseSchema = z.object({
  ok: z.literal(true),
  source_url: z.string(),
  final_url: z.string().describe('Where the source answered from after redirects'),
  resolved_via: z
    .enum(['direct', 'link', 'common_path', 'none'])
    .describe('`direct`: the URL is a feed; `link`: the page links its feeds; `common_path`: a usual feed path at the site root; `none`: no feed found'),
  feeds: z.array(feedSchema),
  rejected: z.array(z.object({ url: z.string(), reason: z.string() })).describe('Candidates tried that are not feeds, with why'),
});

/**
 * A browser navigation (address bar, link, form) must not land here: the route answers JSON to
 * programs only, and never redirects. Navigation requests say so with `Sec-Fetch-Mode: navigate`;
 * older browsers are recognised by an Accept header without JSON.
 */
function isNavigation(headers: Record<string, string | string[] | undefined>): boolean {
  if (headers['sec-fetch-mode'] === 'navigate') return true;
  const accept = String(headers.accept ?? '');
  return accept !== '' && !/application\/json|\*\/\*/i.test(accept);
}

/** POST /api/rss/resolve-source: the feeds of a site, page or feed URL (a platform endpoint). */
export async function rssRoutes(app: FastifyInstance, resolver: FeedResolver) {
  app.withTypeProvider<ZodTypeProvider>().post('/api/rss/resolve-source', {
    config: { auth: signedIn, rateLimit: RATE_LIMIT },
    schema: {
      tags: ['platform'],
      security: [{ session: [] }, { bearerJwt: [] }],
      summary: 'Find the RSS, Atom or JSON feeds of a site, page or feed URL',
      description:
        'Signed-in callers (session with `X-CSRF-Token`, or a JWT bearer), JSON only: a browser navigation ' +
        '(`Sec-Fetch-Mode: navigate`, or an `Accept` header without JSON) is refused with 406 and never redirected. ' +
        'The URL itself is returned when it parses as a feed; otherwise the feeds its HTML links with ' +
        '`<link rel="alternate">`; otherwise the first common feed path at the site root that parses (`/feed`, `/rss`, ' +
        '`/feed.xml`, `/atom.xml`, `/index.xml`, `/feed.json`, …). Every candidate is fetched through the outbound ' +
        'address policy (private and loopback addresses refused, each redirect checked), at most 2 MB and 10 s each, ' +
        '25 s in all, and kept only when a feed parser reads it. No feed found is `200` with `resolved_via: "none"`. ' +
        'The source itself refused by the policy or answering 4xx is 422 under `errors.url`; unreachable, 5xx or too slow is 502.',
      body: z.object({ url: z.string().trim().min(1).max(2048).pipe(z.url()).describe('A site, page or feed URL (http or https)') }),
      response: {
        200: responseSchema,
        401: errorBodySchema,
        403: errorBodySchema,
        406: errorBodySchema,
        422: errorBodySchema,
        429: errorBodySchema,
        502: errorBodySchema,
      },
    },
    preValidation: async (request) => {
      if (isNavigation(request.headers)) {
        throw new AppError('not_acceptable', 'This route answers JSON to programs; send Accept: application/json from a script, not a browser navigation.');
      }
    },
    handler: async (request) => {
      const { url } = request.body;
      if (!/^https?:\/\//i.test(url)) throw new AppError('validation_failed', 'only http and https URLs', { errors: { url: ['only http and https URLs'] } });
      try {
        const r = await resolver.resolve(url);
        return { ok: true as const, source_url: url, ...r };
      } catch (err) {
        if (!(err instanceof SourceFetchError)) throw err;
        if (err.kind === 'refused' || err.kind === 'http' || err.kind === 'too_large') {
          throw new AppError('validation_failed', err.message, { errors: { url: [err.message] } });
        }
        throw new AppError('bad_gateway', `The source could not be fetched: ${err.message}`);
      }
    },
  });
}
