import { createHash, randomBytes } from 'node:crypto';

/**
 * Bearer secrets are 256-bit random values with a recognisable prefix (so secret scanners and our
 * credential router can tell them apart). Only their SHA-256 is stored: with that much entropy a
 * fast hash is enough, and lookups stay an indexed equality.
 */
export const PERSONAL_TOKEN_PREFIX = 'sonar_pat_';
export const DNS_KEY_PREFIX = 'sonar_dns_';
export const WORKER_SECRET_PREFIX = 'sonar_wrk_';

export function newSecret(prefix: string): { secret: string; hash: string; displayPrefix: string } {
  const secret = prefix + randomBytes(32).toString('base64url');
  return { secret, hash: sha256Hex(secret), displayPrefix: secret.slice(0, prefix.length + 6) };
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

export type SecretKind = 'personal_token' | 'dns_api_key' | 'jwt' | 'unknown';

export function classifySecret(value: string): SecretKind {
  if (value.startsWith(PERSONAL_TOKEN_PREFIX)) return 'personal_token';
  if (value.startsWith(DNS_KEY_PREFIX)) return 'dns_api_key';
  if (/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(value)) return 'jwt';
  return 'unknown';
}
