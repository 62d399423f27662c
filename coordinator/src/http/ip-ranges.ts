import { BlockList } from 'node:net';
import { parseCidr } from '@sonar/shared';

/** A set of addresses and CIDR ranges, matched with node's BlockList (handles IPv4-mapped IPv6). */
export class IpRangeSet {
  private readonly list = new BlockList();
  readonly size: number;

  constructor(ranges: readonly string[]) {
    for (const range of ranges) {
      const parsed = parseCidr(range);
      if (!parsed) throw new Error(`not an address or CIDR range: ${range}`);
      const [addr, prefix, family] = parsed;
      this.list.addSubnet(addr, prefix, family);
    }
    this.size = ranges.length;
  }

  has(ip: string): boolean {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
    if (mapped?.[1]) return this.list.check(mapped[1], 'ipv4') || this.list.check(ip, 'ipv6');
    return this.list.check(ip, ip.includes(':') ? 'ipv6' : 'ipv4');
  }
}
