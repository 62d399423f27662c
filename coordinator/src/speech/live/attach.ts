import type { FastifyInstance } from 'fastify';
import { SESSION_COOKIE, verifyAccessJwt } from '../../accounts/auth-plugin.js';
import { hasPermission, type AuthUser } from '../../accounts/types.js';
import type { DomainDeps } from '../../app.js';

/**
 * Connects the live hub to this app's HTTP server. Sockets authenticate like the signed-in API:
 * the browser's session cookie, or a JWT passed as `auth: { token }`; the user needs speech.use.
 */
export function attachLiveHub(app: FastifyInstance, deps: DomainDeps) {
  const { accounts, speech } = deps;

  async function userFromSession(cookieHeader: string | undefined): Promise<AuthUser | null> {
    if (!cookieHeader) return null;
    const raw = app.parseCookie(cookieHeader)[SESSION_COOKIE];
    if (!raw) return null;
    const holder = {} as { session?: { userId?: number } };
    await new Promise<void>((resolve) => app.decryptSession(raw, holder, () => resolve()));
    const id = holder.session?.userId;
    return typeof id === 'number' ? accounts.findActiveUser(id) : null;
  }

  async function userFromJwt(token: unknown): Promise<AuthUser | null> {
    if (typeof token !== 'string' || !token) return null;
    // The same checks as the HTTP routes: signature, expiry, type, active user, token version.
    const claims = verifyAccessJwt(app, token);
    return claims ? accounts.findJwtUser(claims.userId, claims.version) : null;
  }

  speech.live.attach(app, {
    jobs: () => speech.jobs,
    authenticate: async (headers, auth) => {
      const user = (await userFromJwt(auth.token)) ?? (await userFromSession(typeof headers.cookie === 'string' ? headers.cookie : undefined));
      return user && hasPermission(user, 'speech.use') ? user : null;
    },
  });
}
