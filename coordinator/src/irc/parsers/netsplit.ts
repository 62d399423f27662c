/**
 * Netsplits as IRC clients recognise them: a quit whose reason is two host names, in bursts, and
 * the rejoins that follow (the merge).
 */
import type { IrcEventType } from './types.js';

const HOST = /^[A-Za-z0-9*-]+(?:\.[A-Za-z0-9*-]+)+$/;

/** A quit reason of exactly two host names (`*.net *.split`, `irc.a.net irc.b.net`) marks a netsplit, as IRC clients detect it. */
export function isNetsplitReason(reason: string | null): boolean {
  if (!reason) return false;
  const parts = reason.trim().split(' ');
  return parts.length === 2 && parts.every((p) => HOST.test(p)) && parts[0] !== parts[1];
}

/** How far apart (seconds) two quits (or rejoins) of one netsplit may be and still be one burst. */
export const NETSPLIT_BURST_GAP_S = 30;
/** How long after a netsplit quit a rejoin of the same nick counts as the merge. */
export const NETMERGE_WINDOW_S = 30 * 60;

/** How one QUIT or JOIN row is written: its type and, for netsplit rows, its burst. */
export interface BurstMark {
  eventType: IrcEventType;
  netsplitGroup: string | null;
  netsplitLeader: boolean;
}

/**
 * Netsplit and merge grouping for one channel's events in time order, shared by the file
 * importer (finishEvents in parsers/common.ts) and the live logger: a quit whose reason is two
 * host names is a NETSPLIT; such quits with the same reason at most NETSPLIT_BURST_GAP_S apart
 * form one burst (one group id, the first row its leader); a JOIN by a nick that left in a netsplit at most NETMERGE_WINDOW_S earlier is a
 * NETMERGE, grouped into bursts by the same gap. Times are milliseconds since the epoch.
 */
export class NetsplitTracker {
  private split: { group: string; reason: string; last: number } | null = null;
  private merge: { group: string; last: number } | null = null;
  private readonly splitAt = new Map<string, number>();
  private prunedAt = 0;

  /** `newGroup` names a new burst (the importer: its first line; the live logger: a random id). */
  constructor(private readonly newGroup: () => string) {}

  quit(nick: string | null, reason: string | null, atMs: number): BurstMark {
    if (!isNetsplitReason(reason)) return { eventType: 'QUIT', netsplitGroup: null, netsplitLeader: false };
    const why = reason ?? '';
    let leader = false;
    if (!this.split || this.split.reason !== why || atMs - this.split.last > NETSPLIT_BURST_GAP_S * 1000 || atMs < this.split.last) {
      this.split = { group: this.newGroup(), reason: why, last: atMs };
      leader = true;
    }
    this.split.last = atMs;
    this.prune(atMs);
    if (nick) this.splitAt.set(nick.toLowerCase(), atMs);
    return { eventType: 'NETSPLIT', netsplitGroup: this.split.group, netsplitLeader: leader };
  }

  join(nick: string, atMs: number): BurstMark {
    const key = nick.toLowerCase();
    const at = this.splitAt.get(key);
    if (at === undefined || atMs < at || atMs - at > NETMERGE_WINDOW_S * 1000) {
      if (at !== undefined) this.splitAt.delete(key);
      return { eventType: 'JOIN', netsplitGroup: null, netsplitLeader: false };
    }
    this.splitAt.delete(key);
    let leader = false;
    if (!this.merge || atMs - this.merge.last > NETSPLIT_BURST_GAP_S * 1000 || atMs < this.merge.last) {
      this.merge = { group: this.newGroup(), last: atMs };
      leader = true;
    }
    this.merge.last = atMs;
    return { eventType: 'NETMERGE', netsplitGroup: this.merge.group, netsplitLeader: leader };
  }

  /** Nicks waiting for their merge (for tests and status). */
  get pending(): number {
    return this.splitAt.size;
  }

  /** Forgets split nicks whose merge window has passed (at most once a minute). */
  private prune(now: number) {
    if (now - this.prunedAt < 60_000) return;
    this.prunedAt = now;
    for (const [nick, at] of this.splitAt) if (now - at > NETMERGE_WINDOW_S * 1000) this.splitAt.delete(nick);
  }
}
