import { isIPv4, isIPv6 } from 'node:net';

export { canonicalCidr } from '@sonar/shared';

export const isIpAddress = (v: string) => isIPv4(v) || isIPv6(v);
