import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { safeString } from '@sonar/shared';
import type { AuthRequirement } from '../accounts/types.js';
import type { IrcAliasService } from './alias-service.js';
import { sharedRateLimit } from '../http/rate-limits.js';
import { IRC_SOURCES } from './event-store.js';

/** Administrators only, signed in (session, CSRF-checked) or with a JWT. */
const admin: AuthRequirement = { accept: ['session', 'jwt'], adminOnly: true };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['chat-log admin'];

const errorBody = z.object({ success: z.literal(false), error: z.string() });
const errors = { 401: errorBody, 403: errorBody, 404: errorBody, 422: errorBody };

const nickName = safeString().trim().min(1).max(64).regex(/^\S+$/, { error: 'must be one nick without spaces' });
const linkBody = z.object({
  source: z.enum(IRC_SOURCES).default('production'),
  network: safeString().trim().min(1).max(255).describe('Network name (from /irc/api/networks)'),
  nick: nickName,
  alias: nickName,
});
const link = z.object({ network: z.string(), nick: z.string(), alias: z.string(), origin: z.enum(['log', 'admin']), blocked: z.boolean() });

/**
 * The admin-editable alias table: links added here join two nicks into one person for the `nick`
 * filter and `nick_profile`; removing a link (also one learnt from a NICK line) blocks it, so a
 * re-import does not bring it back.
 */
export async function ircAdminRoutes(app: FastifyInstance, opts: { aliases: IrcAliasService; rateLimitMax: number }) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { aliases } = opts;
  app.addHook('onRequest', sharedRateLimit(app, 'admin', opts.rateLimitMax));

  r.get(
    '/irc/api/admin/aliases',
    {
      config: { auth: admin },
      schema: {
        tags,
        security,
        summary: 'Nick links of a network (learnt and admin-made, blocked ones included)',
        querystring: z.object({ source: z.enum(IRC_SOURCES).default('production'), network: safeString().trim().min(1).max(255), nick: nickName.optional() }),
        response: { 200: z.object({ success: z.literal(true), links: z.array(link) }), ...errors },
      },
    },
    async (req) => ({ success: true as const, links: await aliases.list(req.query.source, req.query.network, req.query.nick) }),
  );

  r.post(
    '/irc/api/admin/aliases',
    {
      config: { auth: admin },
      schema: { tags, security, summary: 'Link two nicks as one person', body: linkBody, response: { 200: z.object({ success: z.literal(true) }), ...errors } },
    },
    async (req) => {
      await aliases.add(req.body.source, req.body.network, req.body.nick, req.body.alias);
      return { success: true as const };
    },
  );

  r.delete(
    '/irc/api/admin/aliases',
    {
      config: { auth: admin },
      schema: {
        tags,
        security,
        summary: 'Unlink two nicks (and keep them unlinked on re-import)',
        body: linkBody,
        response: { 200: z.object({ success: z.literal(true), removed: z.boolean() }), ...errors },
      },
    },
    async (req) => ({ success: true as const, removed: await aliases.remove(req.body.source, req.body.network, req.body.nick, req.body.alias) }),
  );
}
