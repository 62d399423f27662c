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

  async function userFromSession(cookieHeader: string | undefined): Promise<{ user: AuthUser; sessionId: string } | null> {
    if (!cookieHeader) return null;
    const raw = app.parseCookie(cookieHeader)[SESSION_COOKIE];
    if (!raw) return null;
    const holder = {} as { session?: { userId?: number; sessionId?: string } };
    await new Promise<void>((resolve) => app.decryptSession(raw, holder, () => resolve()));
    const user = await sessionUserOf(accounts, holder.session);
    return user && holder.session?.sessionId ? { user, sessionId: holder.session.sessionId } : null;
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
      const jwt = await userFromJwt(auth.token);
      const session = jwt ? null : await userFromSession(typeof headers.cookie === 'string' ? headers.cookie : undefined);
      const user = jwt ?? session?.user;
      if (!user || !hasPermission(user, 'speech.use')) return null;
      // Read after the credentials were checked: a version that moved in between is older than the
      // user's, so the next check drops the socket.
      const current = await accounts.activeUsersWithVersion([user.id]);
      const found = current.get(user.id);
      return found ? { user, tokenVersion: found.tokenVersion, ...(session ? { sessionId: session.sessionId } : {}) } : null;
    },
  });
  // A sign-out ends the session's sockets at once, on every coordinator.
  accounts.onSessionEnd((sessionId) => speech.live.endSession(sessionId));

  // An open socket outlives the checks of its handshake: every coordinator looks again at its own
  // sockets' users (in PostgreSQL, where the CLI disables users and changes passwords) and
  // disconnects those disabled, with a moved token version (password changed) or without speech.use.
  const recheck = async () => {
    try {
      await speech.live.dropRevoked(async (holders) => {
        const current = await accounts.activeUsersWithVersion(holders.map((h) => h.user.id));
        return holders.map((h) => {
          const now = current.get(h.user.id);
          return !!now && now.tokenVersion === h.tokenVersion && hasPermission(now.user, 'speech.use');
        });
      });
    } catch (err) {
      app.log.warn({ err }, 'could not check the access of live sockets; trying again later');
    }
  };
  let running: Promise<void> | null = null;
  const timer = setInterval(() => {
    running ??= recheck().finally(() => {
      running = null;
    });
  }, config.LIVE_ACCESS_RECHECK_SECONDS * 1000);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    await running;
  });
}
