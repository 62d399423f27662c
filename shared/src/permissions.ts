/** Permissions a user can be granted. Administrators bypass ordinary permission checks. */
export const PERMISSIONS = ['speech.use', 'speech.manage', 'speech.api', 'provider_openai', 'ai.assistant', 'spam.analyze'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** Scopes a personal access token can carry. A scope only works while its owner also holds the matching permission. */
export const TOKEN_SCOPES = ['speech.api', 'ai.assistant', 'spam.analyze'] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}

export function isTokenScope(value: string): value is TokenScope {
  return (TOKEN_SCOPES as readonly string[]).includes(value);
}

/** How a DNS API caller was admitted; reported as `access_type` by the zone list. */
export const DNS_ACCESS_TYPES = ['authenticated', 'api_key_global', 'ip_whitelist'] as const;
export type DnsAccessType = (typeof DNS_ACCESS_TYPES)[number];
