import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formBody from '@fastify/formbody';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema, safeString, idParam } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import { normalizeError, okReasonBody, sendError } from '../../http/errors.js';
import { pageErrorHandler, sendErrorPage } from '../../http/page.js';
import { sharedRateLimit } from '../../http/rate-limits.js';
import { slugSchema } from '../statuspage/statuspage-schemas.js';
import { renderGuestbookPage } from './guestbook-pages.js';
import type { GuestbookService } from './guestbook-service.js';

const manager: AuthRequirement = { accept: ['session', 'jwt'] };
const MANAGE_LIMIT = { max: 120, timeWindow: '1 minute' };
const READ_LIMIT = { max: 120, timeWindow: '1 minute' };
/** The fixed limit of public form submissions: 60 a minute per client, every guestbook together (not configurable). */
export const GUESTBOOK_SUBMISSIONS_PER_MINUTE = 60;
const tags = ['platform'];
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const maxId = idParam();
const bookParams = z.object({ id: maxId });
const entryParams = z.object({ id: maxId, entryId: maxId });
const slugParams = z.object({ slug: slugSchema });

export const submissionBody = z.object({
  name: safeString().trim().min(1).max(100).describe('Shown with the entry'),
  message: safeString({ multiline: true }).trim().min(1).max(4000),
  website: z.string().max(2000).optional().describe('Honeypot: leave empty or absent. A filled one answers like a held entry and stores nothing.'),
});

const bookBody = z.object({
  slug: slugSchema.describe('Public address: /guestbook/{slug}'),
  title: safeString().trim().min(1).max(200),
  description: safeString({ multiline: true }).max(2000).optional(),
  hold_all: z.boolean().optional().describe('Hold every entry for moderation, ham included (default: ham is published at once)'),
  spam_profile_id: z.number().int().positive().max(2_147_483_647).nullish().describe('One of your spam scoring profiles, applied to every entry'),
});

const bookSchema = z.object({
  id: z.number().int(),
  slug: z.string(),
  title: z.string(),
  description: z.string(),
  hold_all: z.boolean(),
  spam_profile_id: z.number().int().nullable(),
  owner: z.string(),
  pending: z.number().int(),
  published: z.number().int(),
  created_at: z.string(),
});

const moderatedEntrySchema = z.object({
  id: z.number().int(),
  name: z.string(),
  message: z.string(),
  status: z.enum(['pending', 'published', 'rejected']),
  spam: z.object({
    status: z.enum(['ok', 'degraded', 'unavailable']).describe('`unavailable`: spamd could not score it (held)'),
    score: z.number().nullable(),
    threshold: z.number().nullable(),
    verdict: z.enum(['spam', 'ham']).nullable(),
    rules: z.array(z.object({ name: z.string(), score: z.number(), description: z.string(), source: z.enum(['spamassassin', 'profile']) })),
  }),
  client_ip: z.string().nullable(),
  moderated_at: z.string().nullable(),
  moderated_by: z.string().nullable(),
  created_at: z.string(),
});

const isForm = (request: FastifyRequest) => String(request.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');

/** Guestbooks: the public form and entries, and the owners' API. */
export async function guestbookRoutes(app: FastifyInstance, books: GuestbookService) {
  await app.register(formBody);
  const r = app.withTypeProvider<ZodTypeProvider>();
  const submissionLimit = sharedRateLimit(app, 'guestbook', GUESTBOOK_SUBMISSIONS_PER_MINUTE);

  r.get('/guestbook/:slug', {
    config: { auth: 'public', rateLimit: READ_LIMIT },
    schema: { hide: true, params: slugParams, querystring: z.object({ submitted: z.enum(['published', 'pending']).optional() }) },
    errorHandler: (error, request, reply) => void pageErrorHandler(request, reply, normalizeError(error, request)),
    handler: async (request, reply) => {
      const list = await books.published(request.params.slug, { limit: 50, offset: 0 });
      return reply.type('text/html; charset=utf-8').send(renderGuestbookPage(list, { submitted: request.query.submitted }));
    },
  });

  /** A form post that failed: the page again with the message (422), or the error page. */
  const formError = async (request: FastifyRequest, reply: FastifyReply, error: unknown) => {
    const e = normalizeError(error, request);
    const slug = (request.params as { slug?: unknown }).slug;
    if (e.status === 422 && slugSchema.safeParse(slug).success && typeof slug === 'string') {
      const list = await books.published(slug, { limit: 50, offset: 0 }).catch(() => null);
      if (list)
        return reply
          .code(422)
          .type('text/html; charset=utf-8')
          .send(renderGuestbookPage(list, { error: e.message }));
    }
    return sendErrorPage(request, reply, e, { user: null });
  };

  r.post('/guestbook/:slug/entries', {
    onRequest: submissionLimit,
    config: { auth: 'public' },
    schema: {
      tags,
      summary: 'Sign a guestbook (form or JSON)',
      description:
        `Public; ${GUESTBOOK_SUBMISSIONS_PER_MINUTE} submissions a minute per client address across every guestbook (429 after). ` +
        'Every entry is spam-scored by the analyzer of POST /api/spam/analyze (SpamAssassin): ham is published at once (unless ' +
        'the guestbook holds every entry), spam and entries that could not be scored (spamd unavailable) are held for the ' +
        'owner — `status` says `published` or `pending`, never why. `website` is a honeypot: filled, the answer looks like a held ' +
        'entry and nothing is stored. A form post (`application/x-www-form-urlencoded`, the page’s form) is answered with a 303 ' +
        'back to the page.',
      params: slugParams,
      body: submissionBody,
      response: {
        202: z.object({ ok: z.literal(true), status: z.enum(['published', 'pending']), message: z.string() }),
        303: z.null().describe('Form posts: back to the guestbook page'),
        404: errorBodySchema,
        422: errorBodySchema,
        429: errorBodySchema,
      },
    },
    errorHandler: (error, request, reply) => {
      if (isForm(request)) void formError(request, reply, error);
      else void sendError(reply, normalizeError(error, request), okReasonBody);
    },
    handler: async (request, reply) => {
      const { status } = await books.submit(request.params.slug, request.body, request.ip, request.log);
      if (isForm(request)) return reply.redirect(`/guestbook/${encodeURIComponent(request.params.slug)}?submitted=${status}#sign`, 303);
      const message = status === 'published' ? 'Thank you: your entry is published.' : 'Thank you: your entry will appear once the owner approves it.';
      return reply.code(202).send({ ok: true as const, status, message });
    },
  });

  r.get('/api/guestbook/:slug/entries', {
    config: { auth: 'public', rateLimit: READ_LIMIT },
    schema: {
      tags,
      summary: 'The published entries of a guestbook, newest first',
      params: slugParams,
      querystring: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), offset: z.coerce.number().int().min(0).max(1_000_000).default(0) }),
      response: {
        200: z.object({
          ok: z.literal(true),
          guestbook: z.object({ slug: z.string(), title: z.string(), description: z.string() }),
          total: z.number().int(),
          entries: z.array(z.object({ id: z.number().int(), name: z.string(), message: z.string(), created_at: z.string() })),
        }),
        404: errorBodySchema,
        422: errorBodySchema,
        429: errorBodySchema,
      },
    },
    handler: async (request) => ({ ok: true as const, ...(await books.published(request.params.slug, request.query)) }),
  });

  // ---- owners ---------------------------------------------------------------------------------------------
  const base = { config: { auth: manager, rateLimit: MANAGE_LIMIT } };

  r.get('/api/guestbooks', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Your guestbooks (administrators: all), with pending and published counts',
      response: { 200: z.object({ ok: z.literal(true), guestbooks: z.array(bookSchema) }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, guestbooks: await books.listBooks(userOf(request)) }),
  });

  r.post('/api/guestbooks', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Create a guestbook',
      description: 'Any signed-in user may own guestbooks; slugs are unique. From a browser session the request needs `X-CSRF-Token`.',
      body: bookBody,
      response: { 201: z.object({ ok: z.literal(true), guestbook: bookSchema }), ...errors },
    },
    handler: async (request, reply) => reply.code(201).send({ ok: true as const, guestbook: await books.createBook(userOf(request), request.body) }),
  });

  r.patch('/api/guestbooks/:id', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Change a guestbook’s title, description, hold_all or spam profile (the slug stays)',
      params: bookParams,
      body: bookBody.omit({ slug: true }).partial(),
      response: { 200: z.object({ ok: z.literal(true), guestbook: bookSchema }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, guestbook: await books.updateBook(userOf(request), request.params.id, request.body) }),
  });

  r.delete('/api/guestbooks/:id', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Delete a guestbook and its entries',
      params: bookParams,
      response: { 200: z.object({ ok: z.literal(true) }), ...errors },
    },
    handler: async (request) => {
      await books.deleteBook(userOf(request), request.params.id);
      return { ok: true as const };
    },
  });

  r.get('/api/guestbooks/:id/entries', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Entries of your guestbook for moderation, with their spam analysis (latest 500)',
      params: bookParams,
      querystring: z.object({ status: z.enum(['pending', 'published', 'rejected']).optional() }),
      response: { 200: z.object({ ok: z.literal(true), guestbook: bookSchema, entries: z.array(moderatedEntrySchema) }), ...errors },
    },
    handler: async (request) => {
      const { book, entries } = await books.entries(userOf(request), request.params.id, request.query.status);
      return { ok: true as const, guestbook: book, entries };
    },
  });

  for (const action of ['approve', 'reject'] as const) {
    r.post(`/api/guestbooks/:id/entries/:entryId/${action}`, {
      ...base,
      schema: {
        tags,
        security,
        summary: action === 'approve' ? 'Publish an entry' : 'Reject an entry (kept, never shown)',
        params: entryParams,
        response: { 200: z.object({ ok: z.literal(true), entry: moderatedEntrySchema }), ...errors },
      },
      handler: async (request) => ({ ok: true as const, entry: (await books.moderate(userOf(request), request.params.id, request.params.entryId, action))! }),
    });
  }

  r.delete('/api/guestbooks/:id/entries/:entryId', {
    ...base,
    schema: { tags, security, summary: 'Delete an entry', params: entryParams, response: { 200: z.object({ ok: z.literal(true) }), ...errors } },
    handler: async (request) => {
      await books.moderate(userOf(request), request.params.id, request.params.entryId, 'delete');
      return { ok: true as const };
    },
  });
}
