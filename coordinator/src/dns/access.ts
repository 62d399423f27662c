/**
 * Who may see and change which zone:
 * - a user (web session, or a DNS API key bound to a user): administrators read and write every
 *   zone; other users see the zones with a `dns_zone_permissions` row (can_read) and write those
 *   with can_write.
 * - a global DNS API key (no user): reads and writes every zone (it is an operator credential,
 *   created only by the admin CLI).
 * - a whitelisted IP: reads every zone; writes (including cache clear and ACME) only when
 *   DNS_WHITELIST_WRITE=true. An address is not an identity, so write is opt-in.
 */
import type { Principal } from '../accounts/types.js';
import type { AccountService } from '../accounts/account-service.js';
import { forbidden } from '../http/errors.js';
import { normalizeName } from './wire/index.js';

export interface ZoneAccess {
  isAdmin: boolean;
  accessType: Principal['accessType'];
  /** null = every zone. */
  readable: Set<string> | null;
  writable: Set<string> | null;
}

export async function zoneAccess(p: Principal, accounts: AccountService, whitelistWrite: boolean): Promise<ZoneAccess> {
  const base = { isAdmin: p.user?.isAdmin === true, accessType: p.accessType };
  if (p.user) {
    if (p.user.isAdmin) return { ...base, readable: null, writable: null };
    const rights = await accounts.zoneRights(p.user.id);
    return {
      ...base,
      readable: new Set(rights.filter((r) => r.canRead || r.canWrite).map((r) => normalizeName(r.zone))),
      writable: new Set(rights.filter((r) => r.canWrite).map((r) => normalizeName(r.zone))),
    };
  }
  if (p.via === 'dns_api_key') return { ...base, readable: null, writable: null };
  return { ...base, readable: null, writable: whitelistWrite ? null : new Set() };
}

export const canRead = (a: ZoneAccess, zone: string) => a.readable === null || a.readable.has(normalizeName(zone));
export const canWrite = (a: ZoneAccess, zone: string) => a.writable === null || a.writable.has(normalizeName(zone));

export function requireRead(a: ZoneAccess, zone: string) {
  if (!canRead(a, zone)) throw forbidden(`You are not allowed to read zone ${normalizeName(zone)}.`);
}
export function requireWrite(a: ZoneAccess, zone: string) {
  if (!canWrite(a, zone)) throw forbidden(`You are not allowed to change zone ${normalizeName(zone)}.`);
}
