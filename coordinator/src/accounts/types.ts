import type { Permission, TokenScope, DnsAccessType } from '@sonar/shared';

/** The part of a user that authorization needs; never an ORM entity. */
export interface AuthUser {
  id: number;
  username: string;
  email: string | null;
  isAdmin: boolean;
  permissions: Permission[];
}

export type Transport = 'session' | 'jwt' | 'personal_token' | 'dns_api_key' | 'dyndns_token' | 'ip_whitelist';

/** Who is calling, and how they proved it. */
export type Principal =
  | { via: 'session' | 'jwt'; user: AuthUser; accessType: 'authenticated' }
  | { via: 'personal_token'; user: AuthUser; tokenId: number; scopes: TokenScope[]; accessType: 'authenticated' }
  | { via: 'dns_api_key'; user: AuthUser | null; keyId: number; accessType: Extract<DnsAccessType, 'authenticated' | 'api_key_global'> }
  | { via: 'dyndns_token'; user: AuthUser; tokenId: number; accessType: 'authenticated' }
  | { via: 'ip_whitelist'; user: null; accessType: 'ip_whitelist' };

/** What a route declares in `config.auth`. */
export interface AuthRequirement {
  /** Credential kinds the route accepts; anything else presented is refused with 401. */
  accept: Transport[];
  /**
   * Personal tokens always work as `Authorization: Bearer`; with this flag the legacy
   * `X-Api-Key` header and `apikey` query parameter work too (speech token API).
   */
  tokenLegacyTransports?: boolean;
  /** Scope a personal token must carry (403 without it). */
  scope?: TokenScope;
  /** Permissions the user must hold (403 without them); administrators bypass. */
  permissions?: Permission[];
  /** Only administrators (403 otherwise). */
  adminOnly?: boolean;
  /**
   * A DNS API key may also come as the password of HTTP Basic auth (any user name): ACME clients
   * such as lego's httpreq provider can send nothing else (and drop query strings).
   */
  basicAuthApiKey?: boolean;
}

/**
 * What a route declares in `config.auth`: a requirement, or `'public'` for a route that anyone may
 * call (sign-in pages, platform version, public chat-log reads, share pages, docs, static assets)
 * or that checks its caller itself (metrics). A route that declares neither refuses to register.
 */
export type RouteAuth = AuthRequirement | 'public';

export function hasPermission(user: AuthUser, permission: Permission): boolean {
  return user.isAdmin || user.permissions.includes(permission);
}
