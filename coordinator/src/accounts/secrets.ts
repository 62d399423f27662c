import { createHash, randomBytes } from 'node:crypto';

/**
 * Bearer secrets are 256-bit random values with a recognisable prefix (so secret scanners and our
 * credential router can tell them apart). Only their SHA-256 is stored: with that much entropy a
 * fast hash is enough, and lookups stay an indexed equality.
 */
export const PERSONAL_TOKEN_PREFIX = 'sonar_pat_';
export const DNS_KEY_PREFIX = 'sonar_dns_';
export const WORKER_SECRET_PREFIX = 'sonar_wrk_';
/** Dynamic-DNS tokens (the password of HTTP Basic auth on the dyndns2 update routes). */
export const DYNDNS_TOKEN_PREFIX = 'sonar_ddns_';

export function newSecret(prefix: string): { secret: string; hash: string; displayPrefix: string } {
  const secret = prefix + randomBytes(32).toString('base64url');
  return { secret, hash: sha256Hex(secret), displayPrefix: secret.slice(0, prefix.length + 6) };
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

export type SecretKind = 'personal_token' | 'dns_api_key' | 'dyndns_token' | 'jwt' | 'unknown';

export function classifySecret(value: string): SecretKind {
  if (value.startsWith(PERSONAL_TOKEN_PREFIX)) return 'personal_token';
  if (value.startsWith(DNS_KEY_PREFIX)) return 'dns_api_key';
  if (value.startsWith(DYNDNS_TOKEN_PREFIX)) return 'dyndns_token';
  if (/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(value)) return 'jwt';
  return 'unknown';
}
