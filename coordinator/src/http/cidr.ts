import { parseCidr } from '@sonar/shared';

/**
 * The canonical network of a CIDR: host bits cleared and the address in its shortest form, so
 * "10.0.0.1/8" and "10.0.0.0/8", or "2001:DB8::/32" and "2001:db8:0::/32", are one entry.
 */
export function canonicalCidr(value: string): string | null {
  const parsed = parseCidr(value.trim());
  if (!parsed) return null;
  const [addr, prefix, family] = parsed;
  const bits = family === 'ipv4' ? 32 : 128;
  let n = toBigInt(addr, family);
  const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix);
  n &= mask;
  return `${fromBigInt(n, family)}/${prefix}`;
}

function toBigInt(addr: string, family: 'ipv4' | 'ipv6'): bigint {
  if (family === 'ipv4') return addr.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n);
  // The URL parser expands and validates IPv6 (including embedded IPv4) into its canonical form.
  const canonical = new URL(`http://[${addr}]/`).hostname.slice(1, -1);
  const [head = '', tail = ''] = canonical.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = canonical.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

function fromBigInt(n: bigint, family: 'ipv4' | 'ipv6'): string {
  if (family === 'ipv4') return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join('.');
  const groups = [];
  for (let s = 112n; s >= 0n; s -= 16n) groups.push(((n >> s) & 0xffffn).toString(16));
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}
