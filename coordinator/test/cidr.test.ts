import { describe, expect, it } from 'vitest';
import { canonicalCidr } from '../src/http/cidr.js';
import { IpRangeSet } from '../src/http/ip-ranges.js';

describe('canonicalCidr', () => {
  it('clears host bits and adds the full prefix to bare addresses', () => {
    expect(canonicalCidr('10.1.2.3/8')).toBe('10.0.0.0/8');
    expect(canonicalCidr('192.0.2.77')).toBe('192.0.2.77/32');
    expect(canonicalCidr('0.0.0.0/0')).toBe('0.0.0.0/0');
    expect(canonicalCidr('192.0.2.255/25')).toBe('192.0.2.128/25');
  });

  it('normalises IPv6 spelling and masks it', () => {
    expect(canonicalCidr('2001:DB8:0:0::1/32')).toBe('2001:db8::/32');
    expect(canonicalCidr('2001:db8::ffff/112')).toBe('2001:db8::/112');
    expect(canonicalCidr('::1')).toBe('::1/128');
    expect(canonicalCidr('fe80::1:2:3:4/64')).toBe('fe80::/64');
  });

  it('refuses malformed input', () => {
    for (const bad of ['', '10.0.0.0/33', '::/129', '10.0.0/8', 'example.org', '10.0.0.0/-1', '1.2.3.4/8/8']) {
      expect(canonicalCidr(bad)).toBeNull();
    }
  });
});

describe('IpRangeSet', () => {
  it('matches IPv4, IPv6 and IPv4-mapped IPv6 addresses', () => {
    const set = new IpRangeSet(['10.0.0.0/8', '2001:db8::/32']);
    expect(set.has('10.200.1.1')).toBe(true);
    expect(set.has('11.0.0.1')).toBe(false);
    expect(set.has('::ffff:10.0.0.5')).toBe(true);
    expect(set.has('2001:db8:1::1')).toBe(true);
    expect(set.has('2001:db9::1')).toBe(false);
  });
});
