import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  createTokenRequestSchema,
  errorBodySchema,
  loginRequestSchema,
  loginResponseSchema,
  tokenSummarySchema,
  userSummarySchema,
  idParam,
} from '@sonar/shared';
import type { Config } from '../config.js';
import { notFound } from '../http/errors.js';
import { sharedRateLimit } from '../http/rate-limits.js';
import { SPEECH_API_PERMISSIONS, SPEECH_API_TOKEN_NAME, type AccountService } from './account-service.js';
import { accessJwtPayload, userOf } from './auth-plugin.js';
import { presentToken, presentUser } from './presenters.js';
import type { AuthRequirement } from './types.js';

const signedIn: AuthRequirement = { accept: ['session', 'jwt'] };
/** Who may generate the speech token API's token: a signed-in owner the token API would accept. */
const speechApiOwner: AuthRequirement = { ...signedIn, permissions: [...SPEECH_API_PERMISSIONS] };
const speechApiTokenRequestSchema = z
  .strictObject({
    expires_in_days: z.number().int().min(1).max(3650).optional().describe('expire after this many days (default: never)'),
  })
  .describe('Optional; an empty body creates a token that never expires');
const errors = { 401: errorBodySchema, 403: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };

/** A token just created: its value and callback secret, shown only in this answer. */
const createdTokenSchema = z.object({
  ok: z.literal(true),
  token: z.string(),
  callback_secret: z.string().describe('HMAC-SHA256 key that signs terminal callbacks of jobs this token submits; shown once'),
  token_info: tokenSummarySchema,
});

/** JSON account API: JWT login, the caller's identity, personal access tokens. */
export async function accountRoutes(app: FastifyInstance, opts: { config: Config; accounts: AccountService }) {
  const { config, accounts } = opts;
  const r = app.withTypeProvider<ZodTypeProvider>();
  // One sign-in budget with POST /login (accounts/pages.ts), one token-management budget with the pages.
  const loginLimit = sharedRateLimit(app, 'login', config.LOGIN_RATE_LIMIT_PER_MINUTE);
  const tokenLimit = sharedRateLimit(app, 'tokens', config.TOKEN_RATE_LIMIT_PER_MINUTE);

  r.post('/api/account/login', {
    config: { auth: 'public' },
    onRequest: loginLimit,
    schema: {
      tags: ['accounts'],
      summary: 'Exchange a username and password for a JWT bearer token',
      description: 'The token is accepted as `Authorization: Bearer <JWT>` wherever the API says "session or JWT". It expires after JWT_TTL_SECONDS.',
      body: loginRequestSchema,
      response: { 200: loginResponseSchema, ...errors },
    },
    handler: async (request) => {
      const user = await accounts.authenticatePassword(request.body.username, request.body.password);
      const token = app.jwt.sign(await accessJwtPayload(accounts, user.id));
      const expiresAt = new Date(Date.now() + config.JWT_TTL_SECONDS * 1000);
      request.log.info({ userId: user.id }, 'jwt issued');
      return {
        ok: true as const,
        token,
        token_type: 'Bearer' as const,
        expires_in: config.JWT_TTL_SECONDS,
        expires_at: expiresAt.toISOString(),
        user: presentUser(user),
      };
    },
  });

  r.get('/api/account/me', {
    config: { auth: signedIn },
    schema: {
      tags: ['accounts'],
      summary: 'The signed-in user',
      security: [{ session: [] }, { bearerJwt: [] }],
      response: {
        200: z.object({
          ok: z.literal(true),
          user: userSummarySchema,
          zones: z.array(z.object({ zone: z.string(), can_read: z.boolean(), can_write: z.boolean() })),
        }),
        ...errors,
      },
    },
    handler: async (request) => {
      const user = userOf(request);
      const zones = await accounts.zoneRights(user.id);
      return {
        ok: true as const,
        user: presentUser(user),
        zones: zones.map((z) => ({ zone: z.zone, can_read: z.canRead, can_write: z.canWrite })),
      };
    },
  });

  r.get('/api/account/tokens', {
    config: { auth: signedIn },
    onRequest: tokenLimit,
    schema: {
      tags: ['accounts'],
      summary: "The caller's personal access tokens (never their secret values)",
      security: [{ session: [] }, { bearerJwt: [] }],
      response: { 200: z.object({ ok: z.literal(true), tokens: z.array(tokenSummarySchema) }), ...errors },
    },
    handler: async (request) => {
      const tokens = await accounts.listPersonalTokens(userOf(request).id);
      return { ok: true as const, tokens: tokens.map(presentToken) };
    },
  });

  r.post('/api/account/tokens', {
    config: { auth: signedIn },
    onRequest: tokenLimit,
    schema: {
      tags: ['accounts'],
      summary: 'Create a personal access token; its value is shown only in this response',
      description: 'From a browser session the request needs the `X-CSRF-Token` header.',
      security: [{ session: [] }, { bearerJwt: [] }],
      body: createTokenRequestSchema,
      response: {
        201: createdTokenSchema,
        ...errors,
      },
    },
    handler: async (request, reply) => {
      const { token, record, callbackSecret } = await accounts.createPersonalToken(userOf(request).id, {
        name: request.body.name,
        scopes: request.body.scopes,
        ...(request.body.expires_in_days ? { expiresInDays: request.body.expires_in_days } : {}),
      });
      return reply.code(201).send({ ok: true as const, token, callback_secret: callbackSecret, token_info: presentToken(record) });
    },
  });

  r.post('/api/account/tokens/speech-api', {
    config: { auth: speechApiOwner },
    onRequest: tokenLimit,
    // A POST without a body (no Content-Type) is the common call: validated as `{}`.
    preValidation: async (request) => {
      const raw = request as { body: unknown }; // not validated yet
      raw.body ??= {};
    },
    schema: {
      tags: ['accounts'],
      summary: `Generate (or rotate) your ${SPEECH_API_TOKEN_NAME} token for the speech token API; its value is shown only here`,
      description:
        `The built-in generator of the token that \`/api/speech/transcribe*\` expects: a personal access token named ` +
        `\`${SPEECH_API_TOKEN_NAME}\` with scope \`speech.api\`, no expiry unless \`expires_in_days\` is given. Every earlier ` +
        `unrevoked token of yours with that name is revoked in the same transaction (\`revoked_token_ids\`); jobs they submitted ` +
        'still get their callbacks, signed with their own callback secrets. The caller needs the permissions `speech.api` and ' +
        '`speech.use` (403 otherwise; administrators have every permission). The body may be empty; name and scopes are fixed ' +
        '(other fields: 422). From a browser session the request needs the `X-CSRF-Token` header.',
      security: [{ session: [] }, { bearerJwt: [] }],
      body: speechApiTokenRequestSchema,
      response: {
        201: createdTokenSchema.extend({
          revoked_token_ids: z.array(z.number().int()).describe(`ids of your earlier ${SPEECH_API_TOKEN_NAME} tokens revoked by this rotation`),
        }),
        ...errors,
      },
    },
    handler: async (request, reply) => {
      const user = userOf(request);
      const { token, record, callbackSecret, revokedTokenIds } = await accounts.generateSpeechApiToken(user.id, {
        expiresInDays: request.body.expires_in_days,
      });
      request.log.info({ userId: user.id, tokenId: record.id, revokedTokenIds }, 'speech API token generated');
      return reply.code(201).send({
        ok: true as const,
        token,
        callback_secret: callbackSecret,
        token_info: presentToken(record),
        revoked_token_ids: revokedTokenIds,
      });
    },
  });

  r.post('/api/account/tokens/:tokenId/callback-secret', {
    config: { auth: signedIn },
    onRequest: tokenLimit,
    schema: {
      tags: ['accounts'],
      summary: 'Rotate the callback signing secret of one of your tokens; the new value is shown only here',
      security: [{ session: [] }, { bearerJwt: [] }],
      params: z.object({ tokenId: idParam() }),
      response: { 200: z.object({ ok: z.literal(true), callback_secret: z.string() }), 404: errorBodySchema, ...errors },
    },
    handler: async (request) => {
      const secret = await accounts.rotateCallbackSecret(request.params.tokenId, userOf(request).id);
      if (!secret) throw notFound('No such token.');
      return { ok: true as const, callback_secret: secret };
    },
  });

  r.delete('/api/account/tokens/:tokenId', {
    config: { auth: signedIn },
    onRequest: tokenLimit,
    schema: {
      tags: ['accounts'],
      summary: 'Revoke one of your personal access tokens',
      security: [{ session: [] }, { bearerJwt: [] }],
      params: z.object({ tokenId: idParam() }),
      response: { 200: z.object({ ok: z.literal(true), revoked: z.literal(true) }), 404: errorBodySchema, ...errors },
    },
    handler: async (request) => {
      const user = userOf(request);
      if (!(await accounts.revokePersonalToken(request.params.tokenId, user.isAdmin ? {} : { ownerId: user.id }))) {
        throw notFound('No such token.');
      }
      return { ok: true as const, revoked: true as const };
    },
  });
}
