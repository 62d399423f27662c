import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema, safeString, idParam } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import { CATEGORIES, PERSON_TYPES, TARGET_TYPES, parseTarget, type ReputationService } from './reputation-service.js';

const reporter: AuthRequirement = { accept: ['session', 'jwt'] };
const admin: AuthRequirement = { accept: ['session', 'jwt'], adminOnly: true };
const LOOKUP_RATE_LIMIT = { max: 60, timeWindow: '1 minute' };
const REPORT_RATE_LIMIT = { max: 30, timeWindow: '1 minute' };
const tags = ['platform'];
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };

const typeField = z
  .string()
  .max(32)
  .optional()
  .describe(
    `One of ${TARGET_TYPES.join(', ')}; omitted: inferred (URL with a scheme, IP address, else domain). ` +
      `People and profiles (${PERSON_TYPES.join(', ')}, e-mail addresses, profile URLs such as /@name or /users/name) are 422.`,
  );
const targetField = z.string().min(1).max(8192).describe('The URL, post URL, domain, IP address, or content (text, or `sha256:<hex>` of it)');

const lookupQuery = z.object({ type: typeField, target: targetField });

const blocklistSchema = z.object({
  list: z.string(),
  kind: z.enum(['domain', 'ip']),
  query: z.string().nullable(),
  status: z.enum(['listed', 'not_listed', 'unavailable', 'not_applicable']),
  codes: z.array(z.string()),
  reasons: z.array(z.string()),
  error: z.string().optional(),
});

const lookupSchema = z.object({
  ok: z.literal(true),
  target: z.object({ type: z.enum(TARGET_TYPES), value: z.string() }),
  verdict: z.enum(['bad', 'suspicious', 'clean', 'unknown']),
  community: z.object({
    score: z.number(),
    reporters: z.number().int(),
    categories: z.record(z.string(), z.number()),
    last_report_at: z.string().nullable(),
  }),
  blocklists: z.array(blocklistSchema),
  complete: z.boolean().describe('false when a blocklist was unavailable: then `clean` is never claimed'),
});

const reportBody = z.object({
  type: typeField,
  target: targetField,
  category: z.enum(CATEGORIES),
  comment: safeString().max(1000).default(''),
});

const reportSchema = z.object({
  ok: z.literal(true),
  report: z.object({
    id: z.number().int(),
    target: z.object({ type: z.enum(TARGET_TYPES), value: z.string() }),
    category: z.enum(CATEGORIES),
    comment: z.string(),
    weight: z.number(),
    created_at: z.string(),
    replaced: z.boolean().describe('true when it replaced your earlier report of the same target'),
  }),
});

const LOOKUP_DESCRIPTION =
  'Reputation of public content, posts, URLs, domains and server addresses — never of people or profiles (422 with the ' +
  'reason). Combines community reports (one per reporter and target, weight 1, administrators 2, halving every ' +
  'REPUTATION_REPORT_HALF_LIFE_DAYS) with the DNS blocklists of REPUTATION_DNSBLS asked the RFC 5782 way (domain lists ' +
  '`<domain>.<list>`, IP lists reversed octets or nibbles; 127.0.0.x answers, TXT reasons). `verdict`: `bad` (a list ' +
  'lists it, or community score ≥ 3), `suspicious` (score ≥ 1), `unknown` (a list was unavailable), else `clean`. ' +
  'A list that times out or fails is `unavailable`, never clean.';

/** `/api/reputation` and its compatibility aliases (`/lookup`, `/report`). */
export async function reputationRoutes(app: FastifyInstance, reputation: ReputationService) {
  const r = app.withTypeProvider<ZodTypeProvider>();

  // `/api/reputation/lookup` and `/api/reputation/report` are the older paths, kept as aliases.
  for (const path of ['/api/reputation', '/api/reputation/lookup']) {
    r.get(path, {
      config: { auth: 'public', rateLimit: LOOKUP_RATE_LIMIT },
      schema: {
        tags,
        summary: path === '/api/reputation' ? 'Reputation lookup' : 'Reputation lookup (compatibility alias of GET /api/reputation)',
        description: LOOKUP_DESCRIPTION,
        querystring: lookupQuery,
        response: { 200: lookupSchema, 422: errorBodySchema, 429: errorBodySchema },
      },
      handler: async (request, reply) => {
        const result = await reputation.lookup(parseTarget(request.query.type, request.query.target));
        void reply.header('cache-control', 'no-store');
        return { ok: true as const, ...result };
      },
    });
  }

  for (const path of ['/api/reputation/reports', '/api/reputation/report']) {
    r.post(path, {
      config: { auth: reporter, rateLimit: REPORT_RATE_LIMIT },
      schema: {
        tags,
        security,
        summary: path === '/api/reputation/reports' ? 'Report content, a post, URL or domain' : 'Report (compatibility alias of POST /api/reputation/reports)',
        description:
          'A signed-in user (session with X-CSRF-Token, or JWT). One current report per user and target: a new one replaces ' +
          'yours. People and profiles are invalid targets (422). At most REPUTATION_REPORTS_PER_HOUR reports an hour per user ' +
          '(429). Every report, replacement and withdrawal is kept in the audit trail.',
        body: reportBody,
        response: { 201: reportSchema, ...errors },
      },
      handler: async (request, reply) => {
        const { type, target, category, comment } = request.body;
        const report = await reputation.report(userOf(request), parseTarget(type, target), category, comment, request.ip);
        return reply.code(201).send({ ok: true as const, report });
      },
    });
  }

  r.delete('/api/reputation/reports/:id', {
    config: { auth: reporter, rateLimit: REPORT_RATE_LIMIT },
    schema: {
      tags,
      security,
      summary: 'Withdraw your report',
      params: z.object({ id: idParam() }),
      response: { 200: z.object({ ok: z.literal(true) }), ...errors },
    },
    handler: async (request) => {
      await reputation.withdraw(userOf(request), request.params.id, request.ip);
      return { ok: true as const };
    },
  });

  r.get('/api/reputation/audit', {
    config: { auth: admin, rateLimit: LOOKUP_RATE_LIMIT },
    schema: {
      tags,
      security,
      summary: 'Audit trail of one target (administrators)',
      querystring: lookupQuery,
      response: {
        200: z.object({
          ok: z.literal(true),
          entries: z.array(
            z.object({
              at: z.string(),
              actor: z.string().nullable(),
              action: z.enum(['report', 'replace', 'withdraw']),
              detail: z.record(z.string(), z.unknown()),
              client_ip: z.string().nullable(),
            }),
          ),
        }),
        ...errors,
      },
    },
    handler: async (request) => ({
      ok: true as const,
      entries: (await reputation.audit(parseTarget(request.query.type, request.query.target))) as Array<{
        at: string;
        actor: string | null;
        action: 'report' | 'replace' | 'withdraw';
        detail: Record<string, unknown>;
        client_ip: string | null;
      }>,
    }),
  });
}
