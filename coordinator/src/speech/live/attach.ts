import type { FastifyInstance } from 'fastify';
import { SESSION_COOKIE, jwtUser, sessionUserOf } from '../../accounts/auth-plugin.js';
import { hasPermission, type AuthUser } from '../../accounts/types.js';
import type { SpeechDeps } from '../../deps.js';

/**
 * Whether a socket.io handshake comes from an allowed page. Browsers always send `Origin` on
 * WebSocket upgrades and cross-origin requests; it must be PUBLIC_BASE_URL's origin, or the
 * origin of the host the request was sent to (same-origin, e.g. a coordinator reached by its
 * address). Clients without `Origin` (workers' tools, the bench, scripts) are not browsers and
 * bring no ambient cookie to abuse: they stay allowed and authenticate as usual.
 */
export function originAllowed(headers: Record<string, string | string[] | undefined>, publicBaseUrl: string): boolean {
  const origin = headers.origin;
  if (origin === undefined) return true;
  if (typeof origin !== 'string' || origin === 'null') return false;
  let parsed: URL;
  try {
    parsed = new URL(origin);
  } catch {
    return false;
  }
  if (parsed.origin === new URL(publicBaseUrl).origin) return true;
  const host = headers.host;
  return typeof host === 'string' && host.length > 0 && parsed.host === host.toLowerCase();
}

/**
 * Connects the live hub to this app's HTTP server. Sockets authenticate like the signed-in API:
 * the browser's session cookie, or a JWT passed as `auth: { token }`; the user needs speech.use.
 */
export function attachLiveHub(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'accounts' | 'speech'>) {
  const { accounts, speech, config } = deps;

  async function userFromSession(cookieHeader: string | undefined): Promise<AuthUser | null> {
    if (!cookieHeader) return null;
    const raw = app.parseCookie(cookieHeader)[SESSION_COOKIE];
    if (!raw) return null;
    const holder = {} as { session?: { userId?: number } };
    await new Promise<void>((resolve) => app.decryptSession(raw, holder, () => resolve()));
    return sessionUserOf(accounts, holder.session);
  }

  async function userFromJwt(token: unknown): Promise<AuthUser | null> {
    if (typeof token !== 'string' || !token) return null;
    // The same checks as the HTTP routes: signature, expiry, type, active user, token version.
    return (await jwtUser(app, accounts, token)).user;
  }

  speech.live.attach(app, {
    jobs: () => speech.jobs,
    allowHandshake: (headers) => originAllowed(headers, config.PUBLIC_BASE_URL),
    authenticate: async (headers, auth) => {
      const user = (await userFromJwt(auth.token)) ?? (await userFromSession(typeof headers.cookie === 'string' ? headers.cookie : undefined));
      return user && hasPermission(user, 'speech.use') ? user : null;
    },
  });
}
