import fp from 'fastify-plugin';
import fastifyCookie from '@fastify/cookie';
import fastifySession from '@fastify/session';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyJwt from '@fastify/jwt';
import CsrfTokens from '@fastify/csrf';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { AppError, forbidden, unauthenticated } from '../http/errors.js';
import { isPublicScope } from '../http/public-scope.js';
import type { AccountService } from './account-service.js';
import { classifySecret, type SecretKind } from './secrets.js';
import type { PgSessionStore } from './session-store.js';
import { hasPermission, type AuthRequirement, type AuthUser, type Principal, type RouteAuth } from './types.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

declare module 'fastify' {
  interface Session {
    userId?: number;
    _csrf?: string;
  }
}

declare module '@fastify/jwt' {
  interface FastifyJWT {
    /** `ver`: the user's token_version at issue (absent in tokens of earlier releases: version 0). */
    payload: { sub: string; typ: 'access'; ver?: number };
    user: { sub: string; typ: 'access'; ver?: number; iat: number; exp: number };
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
export const SESSION_COOKIE = 'sonar_session';

interface Presented {
  value: string;
  kind: SecretKind;
  where: 'bearer' | 'basic' | 'x-api-key' | 'apikey' | 'api_key';
}

/** The password of `Authorization: Basic base64(user:password)` (RFC 7617), or null when the header is not that. */
function basicPassword(header: string): string | null {
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 ? decoded.slice(colon + 1) : null;
}

/** Credentials in the request, in the order they are considered. */
function presentedCredentials(request: FastifyRequest): Presented[] {
  const found: Presented[] = [];
  const auth = request.headers.authorization;
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    const basic = m ? null : basicPassword(auth);
    if (basic) found.push({ value: basic, kind: classifySecret(basic), where: 'basic' });
    // A malformed Authorization header is a credential that fails, not an absent one.
    else found.push({ value: m?.[1] ?? '', kind: m?.[1] ? classifySecret(m[1]) : 'unknown', where: 'bearer' });
  }
  const headerKey = request.headers['x-api-key'];
  if (typeof headerKey === 'string' && headerKey) found.push({ value: headerKey, kind: classifySecret(headerKey), where: 'x-api-key' });
  const query = (request.query ?? {}) as Record<string, unknown>;
  for (const name of ['apikey', 'api_key'] as const) {
    const v = query[name];
    if (typeof v === 'string' && v) found.push({ value: v, kind: classifySecret(v), where: name });
  }
  return found;
}

/** Whether a presented credential travels in a way the route accepts for its kind. */
function transportAllowed(p: Presented, req: AuthRequirement): boolean {
  switch (p.kind) {
    case 'jwt':
      return req.accept.includes('jwt') && p.where === 'bearer';
    case 'personal_token':
      return (
        req.accept.includes('personal_token') &&
        (p.where === 'bearer' || (req.tokenLegacyTransports === true && (p.where === 'x-api-key' || p.where === 'apikey')))
      );
    case 'dns_api_key':
      return req.accept.includes('dns_api_key') && p.where !== 'apikey' && (p.where !== 'basic' || req.basicAuthApiKey === true);
    case 'dyndns_token':
      // dyndns2 clients (ddclient, inadyn, routers) send the token as the Basic password, nothing else.
      return req.accept.includes('dyndns_token') && p.where === 'basic';
    default:
      return false;
  }
}

/** One registered route and what it declared in `config.auth`. */
export interface RouteAuthEntry {
  method: string;
  url: string;
  auth: RouteAuth;
}

/**
 * Deny by default: every route must declare `config.auth`, either a requirement or `'public'`.
 * A route without one makes registration throw, so the application refuses to start instead of
 * serving an endpoint nobody decided to open. Call right after creating the root instance, before
 * any plugin registers routes. The declarations are kept in `app.routeAuthTable` (tests enumerate
 * the real routes from it).
 */
export function enforceRouteAuth(app: FastifyInstance) {
  const table: RouteAuthEntry[] = [];
  app.decorate('routeAuthTable', table);
  app.addHook('onRoute', function checkRouteAuth(this: FastifyInstance, route) {
    if (route.config?.auth === undefined && isPublicScope(this)) {
      route.config = { ...route.config, auth: 'public' };
    }
    const auth = route.config?.auth;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (auth === undefined) {
      throw new Error(`Route ${methods.join(',')} ${route.url} declares no config.auth: give it an auth requirement or mark it config: { auth: 'public' }.`);
    }
    if (auth !== 'public' && (typeof auth !== 'object' || !Array.isArray(auth.accept) || auth.accept.length === 0)) {
      throw new Error(`Route ${methods.join(',')} ${route.url} has an invalid config.auth.`);
    }
    for (const method of methods) table.push({ method, url: route.url, auth });
  });
}

/** Verifies a dynamic-DNS token (platform/dyndns): its id and owner, or null when unknown or revoked. */
export type DyndnsTokenVerifier = (secret: string) => Promise<{ tokenId: number; ownerId: number } | null>;

export interface AuthPluginOptions {
  config: Config;
  accounts: AccountService;
  sessionStore: PgSessionStore;
  dyndnsTokens: DyndnsTokenVerifier;
}

/**
 * Turns a request into a Principal (or a 401/403) for every route that declares `config.auth`.
 * Runs in preValidation: after rate limiting (onRequest), before body validation.
 */
export const authPlugin = fp(
  async function authPlugin(app: FastifyInstance, opts: AuthPluginOptions) {
    const { config, accounts, sessionStore, dyndnsTokens } = opts;
    const csrfTokens = CsrfTokens();

    await app.register(fastifyCookie);
    await app.register(fastifySession, {
      secret: config.SESSION_SECRET,
      cookieName: SESSION_COOKIE,
      store: sessionStore,
      saveUninitialized: false,
      rolling: false,
      cookie: {
        path: '/',
        httpOnly: true,
        sameSite: 'lax',
        secure: config.COOKIE_SECURE === 'auto' ? 'auto' : config.COOKIE_SECURE === 'true',
        maxAge: config.SESSION_TTL_SECONDS * 1000,
      },
    });
    await app.register(fastifyCsrf, { sessionPlugin: '@fastify/session' });
    await app.register(fastifyJwt, {
      secret: config.JWT_SECRET,
      sign: { expiresIn: config.JWT_TTL_SECONDS, algorithm: 'HS256' },
      verify: { algorithms: ['HS256'] },
    });

    app.decorateRequest('principal', null);

    async function verifyPresented(request: FastifyRequest, p: Presented): Promise<Principal> {
      if (p.kind === 'jwt') {
        const { user, invalid } = await jwtUser(app, accounts, p.value);
        if (invalid) throw unauthenticated('The bearer token is invalid or expired.');
        if (!user) throw unauthenticated('The bearer token no longer maps to an active user (disabled, or its password changed).');
        return { via: 'jwt', user, accessType: 'authenticated' };
      }
      if (p.kind === 'personal_token') {
        const token = await accounts.verifyPersonalToken(p.value);
        if (!token) throw unauthenticated('The access token is invalid, expired or revoked.');
        return { via: 'personal_token', user: token.user, tokenId: token.tokenId, scopes: token.scopes, accessType: 'authenticated' };
      }
      if (p.kind === 'dyndns_token') {
        const token = await dyndnsTokens(p.value);
        const user = token ? await accounts.findActiveUser(token.ownerId) : null;
        if (!token || !user) throw unauthenticated('The dynamic-DNS token is invalid or revoked, or its owner is disabled.');
        return { via: 'dyndns_token', user, tokenId: token.tokenId, accessType: 'authenticated' };
      }
      const key = await accounts.verifyDnsApiKey(p.value);
      if (!key) throw unauthenticated('The API key is invalid, expired or revoked.');
      return {
        via: 'dns_api_key',
        user: key.user,
        keyId: key.keyId,
        accessType: key.user ? 'authenticated' : 'api_key_global',
      };
    }

    async function resolve(request: FastifyRequest, req: AuthRequirement): Promise<Principal> {
      const presented = presentedCredentials(request);
      if (presented.length > 0) {
        // Explicit credentials never fall back to the browser session or the IP whitelist.
        const usable = presented.find((p) => transportAllowed(p, req));
        if (!usable) {
          throw unauthenticated(
            presented.some((p) => p.kind === 'unknown')
              ? 'The credential is malformed or unknown.'
              : 'This endpoint does not accept the kind of credential that was sent.',
          );
        }
        return verifyPresented(request, usable);
      }
      if (req.accept.includes('session')) {
        const user = await sessionUserOf(accounts, request.session);
        if (user) return { via: 'session', user, accessType: 'authenticated' };
      }
      if (req.accept.includes('ip_whitelist') && (await accounts.isWhitelisted(request.ip))) {
        return { via: 'ip_whitelist', user: null, accessType: 'ip_whitelist' };
      }
      throw unauthenticated();
    }

    function authorize(principal: Principal, req: AuthRequirement) {
      const user: AuthUser | null = principal.user;
      if (req.adminOnly && !user?.isAdmin) throw forbidden('Administrator access is required.');
      if (req.scope && principal.via === 'personal_token' && !principal.scopes.includes(req.scope)) {
        throw forbidden(`The access token lacks the scope "${req.scope}".`);
      }
      for (const permission of req.permissions ?? []) {
        if (!user || !hasPermission(user, permission)) throw forbidden(`The permission "${permission}" is required.`);
      }
    }

    function checkCsrf(request: FastifyRequest) {
      const secret = request.session?._csrf;
      const body = request.body as Record<string, unknown> | undefined;
      const h = request.headers;
      // A multipart form (the no-script upload form of /speech) has no parsed body before its handler
      // streams the file, so such a form carries its token in the action URL (`?_csrf=`, redacted in logs).
      const query = /^multipart\/form-data/i.test(h['content-type'] ?? '') ? (request.query as Record<string, unknown> | undefined) : undefined;
      const token =
        (typeof body?._csrf === 'string' ? body._csrf : undefined) ??
        [h['x-csrf-token'], h['csrf-token'], h['x-xsrf-token'], h['xsrf-token']].find((v): v is string => typeof v === 'string') ??
        (typeof query?._csrf === 'string' ? query._csrf : undefined);
      if (!secret || !token || !csrfTokens.verify(secret, token)) {
        throw new AppError('csrf_invalid', 'Missing or invalid CSRF token; reload the page and try again.');
      }
    }

    app.addHook('preValidation', async (request) => {
      const requirement = request.routeOptions.config.auth;
      // Routes without a declaration cannot exist (enforceRouteAuth); 404s have no route config.
      if (!requirement || requirement === 'public') return;
      const principal = await resolve(request, requirement);
      if (principal.via === 'session' && !SAFE_METHODS.has(request.method)) checkCsrf(request);
      authorize(principal, requirement);
      request.principal = principal;
    });

    /** Exposed for page routes that render differently for signed-in users without requiring it. */
    app.decorate('sessionUser', (request: FastifyRequest): Promise<AuthUser | null> => sessionUserOf(accounts, request.session));
    app.decorate('verifyCsrf', checkCsrf);
  },
  { name: 'sonar-auth' },
);

declare module 'fastify' {
  interface FastifyInstance {
    routeAuthTable: readonly RouteAuthEntry[];
    sessionUser(request: FastifyRequest): Promise<AuthUser | null>;
    verifyCsrf(request: FastifyRequest): void;
  }
}

/** The active user of a session (its `userId`); null without one, or when the user is gone or disabled. */
export async function sessionUserOf(accounts: AccountService, session: { userId?: unknown } | null | undefined): Promise<AuthUser | null> {
  const id = session?.userId;
  return typeof id === 'number' ? accounts.findActiveUser(id) : null;
}

/**
 * The user an access JWT stands for, for HTTP routes and socket.io alike: `invalid` when the
 * signature, expiry or type is wrong; `user` null when it no longer maps to an active user at the
 * token's version (disabled, or the password changed).
 */
export async function jwtUser(app: FastifyInstance, accounts: AccountService, token: string): Promise<{ user: AuthUser | null; invalid: boolean }> {
  const claims = verifyAccessJwt(app, token);
  if (!claims) return { user: null, invalid: true };
  return { user: await accounts.findJwtUser(claims.userId, claims.version), invalid: false };
}

/** A JWT's claims when its signature, expiry and type are valid (null otherwise). */
function verifyAccessJwt(app: FastifyInstance, token: string): { userId: number; version: number } | null {
  try {
    const payload = app.jwt.verify<{ sub: string; typ: string; ver?: unknown }>(token);
    if (payload.typ !== 'access') return null;
    const userId = Number(payload.sub);
    const version = payload.ver === undefined ? 0 : payload.ver;
    if (!Number.isSafeInteger(userId) || userId <= 0 || typeof version !== 'number' || !Number.isSafeInteger(version)) return null;
    return { userId, version };
  } catch {
    return null;
  }
}

/** The payload of a new access JWT for a user at their current token version. */
export async function accessJwtPayload(accounts: AccountService, userId: number) {
  return { sub: String(userId), typ: 'access' as const, ver: await accounts.tokenVersionOf(userId) };
}

/** The principal of a route that declared `config.auth` (the hook guarantees it is set). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw unauthenticated();
  return request.principal;
}

export function userOf(request: FastifyRequest): AuthUser {
  const p = principalOf(request);
  if (!p.user) throw forbidden('A user account is required for this action.');
  return p.user;
}
