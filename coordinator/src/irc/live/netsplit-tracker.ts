import { randomBytes } from 'node:crypto';
import { NetsplitTracker } from '../parsers/netsplit.js';

export { NetsplitTracker } from '../parsers/netsplit.js';

/** A positive 63-bit id as a decimal string (irc_events.netsplit_group is a bigint). */
export function randomNetsplitGroup(): string {
  return (randomBytes(8).readBigUInt64BE(0) & 0x7fffffffffffffffn).toString();
}

/** The live logger's tracker: bursts get random ids (there is no line number to name them after). */
export const liveNetsplitTracker = () => new NetsplitTracker(randomNetsplitGroup);
