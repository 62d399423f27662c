import { randomBytes } from 'node:crypto';
import { SHARE_PATH_PREFIX } from '../../http/log-redaction.js';

/** The public transcript page of a share token, under PUBLIC_BASE_URL (never a local-only address). */
export function shareUrl(publicBaseUrl: string, token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}${SHARE_PATH_PREFIX}${encodeURIComponent(token)}`;
}

/** A new unguessable share token (192 bits, URL-safe); the same form the lease service issues. */
export function newShareToken(): string {
  return randomBytes(24).toString('base64url');
}

/** Shapes a share token may have; anything else is answered 404 without a database look-up. */
export const SHARE_TOKEN_PATTERN = /^[A-Za-z0-9_-]{16,64}$/;
