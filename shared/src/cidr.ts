import { isIPv4, isIPv6 } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * An address (`10.1.2.3`, `2001:db8::1`) or CIDR range (`10.0.0.0/8`) as [address, prefix, family];
 * null when malformed. A bare address is its own /32 or /128. The syntax of every CIDR list setting
 * (OUTBOUND_ALLOW_RANGES, METRICS_ALLOW, TRUST_PROXY, the worker's --outbound-allow-ranges).
 */
export function parseCidr(value: string): [string, number, 'ipv4' | 'ipv6'] | null {
  const parts = value.split('/');
  if (parts.length > 2) return null;
  const [addr, prefixText] = parts;
  if (!addr) return null;
  const family = isIPv4(addr) ? 'ipv4' : isIPv6(addr) ? 'ipv6' : null;
  if (!family) return null;
  const max = family === 'ipv4' ? 32 : 128;
  if (prefixText === undefined) return [addr, max, family];
  if (!/^\d+$/.test(prefixText)) return null;
  const prefix = Number(prefixText);
  if (prefix > max) return null;
  return [addr, prefix, family];
}

/**
 * The canonical network of a CIDR: host bits cleared and the address in its shortest form, so
 * "10.0.0.1/8" and "10.0.0.0/8", or "2001:DB8::/32" and "2001:db8:0::/32", are one entry; null
 * when malformed (parseCidr's syntax).
 */
export function canonicalCidr(value: string): string | null {
  const parsed = parseCidr(value.trim());
  if (!parsed) return null;
  const [addr, prefix, family] = parsed;
  const network = (family === 'ipv4' ? ipaddr.IPv4 : ipaddr.IPv6).networkAddressFromCIDR(`${addr}/${prefix}`);
  return `${network.toString()}/${prefix}`;
}
