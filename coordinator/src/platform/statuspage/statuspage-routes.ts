import type { FastifyInstance } from 'fastify';
import fastifyEtag from '@fastify/etag';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import { normalizeError } from '../../http/errors.js';
import { pageErrorHandler } from '../../http/page.js';
import {
  auditSchema,
  componentBody,
  componentParams,
  componentPatch,
  incidentBody,
  incidentParams,
  incidentPatch,
  managedComponentSchema,
  managedIncidentSchema,
  managedPageDetailSchema,
  managedPageSchema,
  managedUpdateSchema,
  pageBody,
  pageParams,
  slugParams,
  summarySchema,
  updateBody,
  updateParams,
} from './statuspage-schemas.js';
import { renderPublicStatusPage } from './statuspage-pages.js';
import type { StatusPageService } from './statuspage-service.js';

/** Owners manage their pages from the browser or with a JWT; administrators manage every page. */
const manager: AuthRequirement = { accept: ['session', 'jwt'] };
const MANAGE_LIMIT = { max: 120, timeWindow: '1 minute' };
/** Public reads are cheap and cacheable (ETag): 300 a minute per client and route. */
const PUBLIC_LIMIT = { max: 300, timeWindow: '1 minute' };
/** Clients and proxies may reuse an answer for 30 s, then revalidate it with If-None-Match. */
export const PUBLIC_CACHE_CONTROL = 'public, max-age=30, must-revalidate';
const tags = ['platform'];
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const ok = z.object({ ok: z.literal(true) });

/**
 * Strong ETags from @fastify/etag (SHA-256 of the body) and 304 for a matching If-None-Match, the
 * header read as RFC 9110 has it: a list of tags or `*`, compared weakly. (The plugin's own 304
 * compares the whole header with the tag, so a list never matched.) Only successful GET and HEAD
 * answers are revalidated.
 */
async function conditionalGet(app: FastifyInstance) {
  await app.register(fastifyEtag, { algorithm: 'sha256', replyWith304: false });
  app.addHook('onSend', async (request, reply, payload) => {
    const etag = reply.getHeader('etag');
    const header = request.headers['if-none-match'];
    if (reply.statusCode !== 200 || typeof etag !== 'string' || !header || !['GET', 'HEAD'].includes(request.method)) return payload;
    const strip = (tag: string) => tag.trim().replace(/^W\//, '');
    const tags = header.split(',').map(strip);
    if (!tags.includes('*') && !tags.includes(strip(etag))) return payload;
    void reply.code(304);
    return '';
  });
}

/** Status pages: the public summary, the public HTML page and the management API. */
export async function statusPageRoutes(app: FastifyInstance, pages: StatusPageService) {
  // Public: JSON and HTML, each with a strong ETag (a hash of the body) and 304 on If-None-Match.
  await app.register(async (pub) => {
    await conditionalGet(pub);
    const r = pub.withTypeProvider<ZodTypeProvider>();
    r.get('/api/statuspage/:slug', {
      config: { auth: 'public', rateLimit: PUBLIC_LIMIT },
      schema: {
        tags,
        summary: 'Public status of one status page (Statuspage summary.json shape)',
        description:
          'The page, its overall status indicator (`none`, `minor`, `major`, `critical`, `maintenance`), every component and ' +
          'component group (`group: true`, with `components` ids) with its status, the unresolved incidents and the upcoming or ' +
          'in-progress scheduled maintenances, each with its published updates (newest first). Incidents appear once an update ' +
          'is published; draft updates, internal notes and the audit trail are never part of it. `Cache-Control: public, ' +
          'max-age=30, must-revalidate` and a strong `ETag`: send it back as `If-None-Match` for a 304.',
        params: slugParams,
        response: { 200: summarySchema, 304: z.null().describe('Not modified (If-None-Match matched the ETag)'), 404: errorBodySchema, 429: errorBodySchema },
      },
      handler: async (request, reply) => {
        const summary = await pages.summary(request.params.slug);
        void reply.header('cache-control', PUBLIC_CACHE_CONTROL);
        return summary;
      },
    });
  });

  await app.register(async (html) => {
    await conditionalGet(html);
    html.setErrorHandler((error, request, reply) => pageErrorHandler(request, reply, normalizeError(error, request)));
    html.withTypeProvider<ZodTypeProvider>().get('/status/:slug', {
      config: { auth: 'public', rateLimit: PUBLIC_LIMIT },
      schema: { hide: true, params: slugParams },
      handler: async (request, reply) => {
        const summary = await pages.summary(request.params.slug);
        void reply.header('cache-control', PUBLIC_CACHE_CONTROL);
        // Rendered for everyone alike (no user, no script): the same bytes, the same ETag.
        return reply.type('text/html; charset=utf-8').send(renderPublicStatusPage(summary));
      },
    });
  });

  const r = app.withTypeProvider<ZodTypeProvider>();
  const base = { config: { auth: manager, rateLimit: MANAGE_LIMIT } };

  r.get('/api/statuspages', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Your status pages (administrators: all)',
      response: { 200: z.object({ ok: z.literal(true), pages: z.array(managedPageSchema) }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, pages: await pages.listPages(userOf(request)) }),
  });

  r.post('/api/statuspages', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Create a status page',
      description: 'Any signed-in user may own status pages. Slugs are unique across the service. From a browser session the request needs `X-CSRF-Token`.',
      body: pageBody,
      response: { 201: z.object({ ok: z.literal(true), page: managedPageSchema }), ...errors },
    },
    handler: async (request, reply) => reply.code(201).send({ ok: true as const, page: await pages.createPage(userOf(request), request.body) }),
  });

  r.get('/api/statuspages/:id', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'One status page with everything: components, incidents with draft and published updates, internal notes, audit',
      params: pageParams,
      response: { 200: managedPageDetailSchema, ...errors },
    },
    handler: async (request) => ({ ok: true as const, ...(await pages.managedPage(userOf(request), request.params.id)) }),
  });

  r.patch('/api/statuspages/:id', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Rename a status page or change its time zone (the slug stays)',
      params: pageParams,
      body: pageBody.omit({ slug: true }).partial(),
      response: { 200: z.object({ ok: z.literal(true), page: managedPageSchema }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, page: await pages.updatePage(userOf(request), request.params.id, request.body) }),
  });

  r.delete('/api/statuspages/:id', {
    ...base,
    schema: { tags, security, summary: 'Delete a status page', params: pageParams, response: { 200: ok, ...errors } },
    handler: async (request) => {
      await pages.deletePage(userOf(request), request.params.id);
      return { ok: true as const };
    },
  });

  r.get('/api/statuspages/:id/audit', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'The audit trail of a status page (latest 200 management actions)',
      params: pageParams,
      response: { 200: z.object({ ok: z.literal(true), audit: z.array(auditSchema) }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, audit: await pages.auditLog(userOf(request), request.params.id) }),
  });

  r.post('/api/statuspages/:id/components', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Add a component or a component group',
      params: pageParams,
      body: componentBody,
      response: { 201: z.object({ ok: z.literal(true), component: managedComponentSchema }), ...errors },
    },
    handler: async (request, reply) =>
      reply.code(201).send({ ok: true as const, component: await pages.addComponent(userOf(request), request.params.id, request.body) }),
  });

  r.patch('/api/statuspages/:id/components/:componentId', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Change a component (its status, name, group, position); the change is public at once',
      params: componentParams,
      body: componentPatch,
      response: { 200: z.object({ ok: z.literal(true), component: managedComponentSchema }), ...errors },
    },
    handler: async (request) => ({
      ok: true as const,
      component: await pages.updateComponent(userOf(request), request.params.id, request.params.componentId, request.body),
    }),
  });

  r.delete('/api/statuspages/:id/components/:componentId', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Delete a component (a group’s components become ungrouped)',
      params: componentParams,
      response: { 200: ok, ...errors },
    },
    handler: async (request) => {
      await pages.deleteComponent(userOf(request), request.params.id, request.params.componentId);
      return { ok: true as const };
    },
  });

  r.post('/api/statuspages/:id/incidents', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Open an incident or schedule a maintenance',
      description:
        'Nothing is public until an update is published (`update.publish`, or later). Maintenances need `scheduled_for` and ' +
        '`scheduled_until`. `internal_notes` never leave the management API.',
      params: pageParams,
      body: incidentBody,
      response: { 201: z.object({ ok: z.literal(true), incident: managedIncidentSchema.extend({ updates: z.array(managedUpdateSchema) }) }), ...errors },
    },
    handler: async (request, reply) =>
      reply.code(201).send({ ok: true as const, incident: await pages.createIncident(userOf(request), request.params.id, request.body) }),
  });

  r.patch('/api/statuspages/:id/incidents/:incidentId', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Change an incident’s name, impact, components or internal notes (status changes come with published updates)',
      params: incidentParams,
      body: incidentPatch,
      response: { 200: z.object({ ok: z.literal(true), incident: managedIncidentSchema }), ...errors },
    },
    handler: async (request) => ({
      ok: true as const,
      incident: await pages.updateIncident(userOf(request), request.params.id, request.params.incidentId, request.body),
    }),
  });

  r.post('/api/statuspages/:id/incidents/:incidentId/updates', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Add an update to an incident or maintenance (a draft unless `publish`)',
      description: 'Publishing moves the incident to the update’s status; `resolved` (incidents) and `completed` (maintenances) take it off the public page.',
      params: incidentParams,
      body: updateBody,
      response: { 201: z.object({ ok: z.literal(true), update: managedUpdateSchema }), ...errors },
    },
    handler: async (request, reply) =>
      reply.code(201).send({ ok: true as const, update: await pages.addUpdate(userOf(request), request.params.id, request.params.incidentId, request.body) }),
  });

  r.post('/api/statuspages/:id/incidents/:incidentId/updates/:updateId/publish', {
    ...base,
    schema: {
      tags,
      security,
      summary: 'Publish a draft update',
      params: updateParams,
      response: { 200: z.object({ ok: z.literal(true), update: managedUpdateSchema }), 409: errorBodySchema, ...errors },
    },
    handler: async (request) => ({
      ok: true as const,
      update: await pages.publishUpdate(userOf(request), request.params.id, request.params.incidentId, request.params.updateId),
    }),
  });
}
