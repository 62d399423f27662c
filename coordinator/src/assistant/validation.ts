import type { AuthenticationResult } from '@azure/msal-node';
import type { Validation } from './repository.js';

/** The tenant of personal Microsoft accounts: never accepted (work or school accounts only). */
export const PERSONAL_ACCOUNT_TENANT = '9188040d-6c67-4c5b-b112-36a304b66dad';

/** The delegated scopes requested at every sign-in. `openid`, `profile` and `offline_access` are OpenID Connect scopes MSAL adds itself. */
export const DEFAULT_SCOPES = [
  'offline_access',
  'openid',
  'profile',
  'User.Read',
  'Sites.Read.All',
  'Mail.Read',
  'People.Read.All',
  'OnlineMeetingTranscript.Read.All',
  'Chat.Read',
  'ChannelMessage.Read.All',
  'ExternalItem.Read.All',
] as const;

export const OIDC_SCOPES = new Set(['openid', 'profile', 'offline_access', 'email']);

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `https://graph.microsoft.com/Mail.Read` → `mail.read`. */
const scopeName = (s: string) => (s.split('/').pop() ?? s).toLowerCase();

/** The delegated (resource) scopes of a required list: what the access token must carry. */
export const resourceScopes = (scopes: readonly string[]) => scopes.filter((s) => !OIDC_SCOPES.has(s.toLowerCase()));

/**
 * Checks a token response before a connection is marked ready and before every upstream call: an
 * ID token issued to this application (audience) for an organizational tenant (never the
 * personal-account tenant), a usable account (object id and user name present), and every
 * required delegated scope granted in the response.
 */
export function validateTokenResponse(result: AuthenticationResult, expected: { clientId: string; scopes: readonly string[] }, now = new Date()): Validation {
  const claims = (result.idTokenClaims ?? {}) as Record<string, unknown>;
  const tid = typeof claims.tid === 'string' ? claims.tid : (result.tenantId ?? null);
  const base = { tenant_id: tid, at: now.toISOString() };
  const fail = (code: string, message: string, missing: string[] = []): Validation => ({ ok: false, code, message, missing_scopes: missing, ...base });
  if (!result.idToken || !result.idTokenClaims) return fail('id_token_missing', 'The identity provider returned no ID token.');
  if (!tid || !GUID.test(tid)) return fail('tenant_missing', 'The ID token names no tenant (tid).');
  if (tid.toLowerCase() === PERSONAL_ACCOUNT_TENANT) {
    return fail('personal_account', 'A personal Microsoft account was used; sign in with a work or school account of an organization.');
  }
  if (
    (result.tenantId && result.tenantId.toLowerCase() !== tid.toLowerCase()) ||
    (result.account?.tenantId && result.account.tenantId.toLowerCase() !== tid.toLowerCase())
  ) {
    return fail('tenant_mismatch', 'The token response and the ID token name different tenants.');
  }
  const aud = claims.aud;
  const audiences = Array.isArray(aud) ? aud : [aud];
  if (!audiences.includes(expected.clientId))
    return fail('wrong_audience', 'The ID token was issued to another application than the one configured for this setup.');
  if (typeof claims.exp === 'number' && claims.exp * 1000 < now.getTime() - 5 * 60_000) return fail('id_token_expired', 'The ID token has expired.');
  if (typeof claims.oid !== 'string' || !claims.oid || !(claims.preferred_username || result.account?.username)) {
    return fail('account_unusable', 'The signed-in account has no object id or user name; it cannot be used.');
  }
  if (!result.accessToken) return fail('access_token_missing', 'The identity provider returned no access token.');
  const granted = new Set(result.scopes.map(scopeName));
  const missing = resourceScopes(expected.scopes).filter((s) => !granted.has(scopeName(s)));
  if (missing.length) {
    return fail(
      'scope_missing',
      `Required delegated permissions were not granted: ${missing.join(', ')}. An administrator may need to grant consent.`,
      missing,
    );
  }
  return {
    ok: true,
    code: null,
    message: 'The token belongs to an organizational tenant, was issued to this application and carries every required permission.',
    missing_scopes: [],
    ...base,
  };
}

/** What to do about an identity-provider error code (shown on the page and in API errors). */
const ADVICE: Record<string, string> = {
  AADSTS50020:
    'The app registration accepts accounts of its own directory only. In the app registration set "Supported account types" to accounts in any organizational directory (multitenant). Keep the "organizations" authority; do not pin a tenant and do not add the user as a guest.',
  AADSTS65001:
    'The permissions have not been consented to. An administrator of the user’s organization must grant tenant-wide consent (use the consent link), then connect again.',
  AADSTS90094: 'An administrator must approve these permissions: use the tenant-wide consent link, then connect again.',
  AADSTS90008: 'The permissions need an administrator’s approval: use the tenant-wide consent link, then connect again.',
  AADSTS50105: 'The application requires user assignment and this user is not assigned. An administrator assigns the user to the enterprise application.',
  AADSTS53003: 'Conditional access blocked the sign-in. The sign-in event in the organization’s sign-in logs names the policy.',
  AADSTS50076: 'Multi-factor authentication is required: connect again and complete it.',
  AADSTS50079: 'The user must register for multi-factor authentication, then connect again.',
  AADSTS700016: 'The application (client) id is not known in this directory: check the setup’s application id, or have an administrator grant consent.',
  AADSTS7000215: 'The client secret is wrong or expired: an administrator saves a new secret in the setup.',
  AADSTS7000222: 'The client secret has expired: an administrator saves a new secret in the setup.',
  AADSTS50011: 'The redirect URI is not registered: add the setup’s redirect URI to the app registration (Web platform).',
  AADSTS70008: 'The sign-in has expired: connect again.',
  AADSTS700082: 'The refresh token has expired after inactivity: connect again.',
  AADSTS50173: 'The grant was revoked (password change or sign-out everywhere): connect again.',
  AADSTS500011: 'The resource is not available in this tenant: check the graph URL and the consented permissions.',
};

export function identityProviderCode(text: string | undefined | null): string | null {
  return /AADSTS\d+/.exec(text ?? '')?.[0] ?? null;
}

export function adviceFor(code: string | null): string {
  if (code && ADVICE[code]) return ADVICE[code];
  return 'The identity provider refused the sign-in. Its sign-in event (with this code and the correlation id) in the organization’s sign-in logs names the cause.';
}
