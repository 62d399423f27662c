import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema, safeString, idParam } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import type { SpamService } from './spam-service.js';

/** A personal access token (user-bound) with scope spam.analyze, of a user who holds the permission. */
const analyzer: AuthRequirement = { accept: ['personal_token'], scope: 'spam.analyze', permissions: ['spam.analyze'] };
/** Profiles are managed from the browser or with a JWT. */
const manager: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['spam.analyze'] };
const RATE_LIMIT = { max: 120, timeWindow: '1 minute' };
const tags = ['platform'];
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };

const ruleSchema = z.object({
  name: z
    .string()
    .regex(/^[A-Z][A-Z0-9_]{1,39}$/, 'upper-case letters, digits and underscores, like SpamAssassin rule names')
    .describe('Rule name shown among the matched rules'),
  pattern: z.string().min(1).max(200).describe('Regular expression (case-insensitive, Unicode)'),
  field: z.enum(['subject', 'from', 'body', 'any']).default('any'),
  score: z.number().min(-100).max(100),
  description: safeString().max(200).default(''),
});

const profileBody = z.object({
  name: safeString().trim().min(1).max(100),
  threshold: z.number().min(-100).max(1000).default(5).describe('Score at or above which the verdict is spam'),
  allow_senders: z.array(safeString().trim().min(1).max(254)).max(500).default([]).describe('Addresses or domains always let through (-100)'),
  deny_senders: z.array(safeString().trim().min(1).max(254)).max(500).default([]).describe('Addresses or domains always refused (+100)'),
  extra_rules: z.array(ruleSchema).max(100).default([]),
});

const profileSchema = profileBody.extend({ id: z.number().int(), created_at: z.string(), updated_at: z.string() });

const analyzeBody = z
  .object({
    message: z.string().min(1).optional().describe('The raw message (RFC 822: headers, blank line, body)'),
    from: safeString().max(998).optional(),
    to: safeString().max(998).optional(),
    subject: safeString().max(998).optional(),
    body: z.string().min(1).optional().describe('Text body, when `message` is not given'),
    profile_id: z.number().int().positive().max(2_147_483_647).optional().describe('One of your scoring profiles'),
  })
  .refine((b) => (b.message === undefined) !== (b.body === undefined), {
    message: 'send either `message` (raw) or `body` (with from, to, subject)',
    path: ['message'],
  });

const analysisSchema = z.object({
  ok: z.literal(true),
  status: z.enum(['ok', 'degraded']).describe('`degraded`: scoring was partial (see `warnings`); unavailable scoring is a 503, never a zero score'),
  score: z.number(),
  threshold: z.number(),
  verdict: z.enum(['spam', 'ham']),
  rules: z.array(z.object({ name: z.string(), score: z.number(), description: z.string(), source: z.enum(['spamassassin', 'profile']) })),
  warnings: z.array(z.string()),
  profile: z.object({ id: z.number().int(), name: z.string() }).nullable(),
  spamassassin: z.object({ score: z.number(), required_score: z.number() }),
});

const idParams = z.object({ id: idParam() });

/** POST /api/spam/analyze and the scoring profiles (a platform endpoint). */
export async function spamRoutes(app: FastifyInstance, spam: SpamService) {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post('/api/spam/analyze', {
    config: { auth: analyzer, rateLimit: RATE_LIMIT },
    schema: {
      tags,
      security: [{ personalToken: [] }],
      summary: 'Score a message for spam with SpamAssassin',
      description:
        'A personal access token with scope `spam.analyze` (its owner needs the permission); sessions, JWTs and DNS API keys ' +
        '(global or not) are refused. Send the raw message as `message`, or its parts (`from`, `to`, `subject`, `body`). ' +
        '`profile_id` applies one of your profiles: its threshold, sender allow/deny lists (±100) and extra rules. The answer ' +
        'lists every matched rule with its description. `status: degraded` says scoring was partial (spamd without network ' +
        'tests — `SPAMD_NETWORK_TESTS` — or rules that timed out); spamd down or too slow is 503 `service_unavailable` — ' +
        'never a zero score. At most 1 MB per message.',
      body: analyzeBody,
      response: { 200: analysisSchema, ...errors, 503: errorBodySchema },
    },
    handler: async (request) => {
      const { profile_id, message, body, from, to, subject } = request.body;
      const input = message !== undefined ? { message } : { body: body!, from, to, subject };
      return { ok: true as const, ...(await spam.analyze(userOf(request).id, input, profile_id)) };
    },
  });

  r.get('/api/spam/profiles', {
    config: { auth: manager, rateLimit: RATE_LIMIT },
    schema: {
      tags,
      security,
      summary: 'Your spam scoring profiles',
      response: { 200: z.object({ ok: z.literal(true), profiles: z.array(profileSchema) }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, profiles: await spam.profiles(userOf(request).id) }),
  });

  r.post('/api/spam/profiles', {
    config: { auth: manager, rateLimit: RATE_LIMIT },
    schema: {
      tags,
      security,
      summary: 'Create a spam scoring profile',
      description:
        'Names are unique per user. Extra rule patterns must compile and must not nest repetition (`(a+)+`). From a browser session the request needs `X-CSRF-Token`.',
      body: profileBody,
      response: { 201: z.object({ ok: z.literal(true), profile: profileSchema }), ...errors },
    },
    handler: async (request, reply) => {
      const profile = await spam.createProfile(userOf(request).id, request.body);
      return reply.code(201).send({ ok: true as const, profile });
    },
  });

  r.get('/api/spam/profiles/:id', {
    config: { auth: manager, rateLimit: RATE_LIMIT },
    schema: {
      tags,
      security,
      summary: 'One of your spam scoring profiles',
      params: idParams,
      response: { 200: z.object({ ok: z.literal(true), profile: profileSchema }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, profile: await spam.profile(userOf(request).id, request.params.id) }),
  });

  r.put('/api/spam/profiles/:id', {
    config: { auth: manager, rateLimit: RATE_LIMIT },
    schema: {
      tags,
      security,
      summary: 'Replace a spam scoring profile',
      params: idParams,
      body: profileBody,
      response: { 200: z.object({ ok: z.literal(true), profile: profileSchema }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, profile: await spam.updateProfile(userOf(request).id, request.params.id, request.body) }),
  });

  r.delete('/api/spam/profiles/:id', {
    config: { auth: manager, rateLimit: RATE_LIMIT },
    schema: { tags, security, summary: 'Delete a spam scoring profile', params: idParams, response: { 200: z.object({ ok: z.literal(true) }), ...errors } },
    handler: async (request) => {
      await spam.deleteProfile(userOf(request).id, request.params.id);
      return { ok: true as const };
    },
  });
}
