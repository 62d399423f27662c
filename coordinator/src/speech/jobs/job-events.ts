import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { JobChange, LiveAi, LiveDiarization, LiveSegment, LiveStatus } from '@sonar/shared/live-events';
import { watchRedis, type OutageLog } from '../../infra/redis-watch.js';
import { SetMap } from '../../infra/set-map.js';

// The payloads are the socket.io contract's (shared/src/live-events.ts), which the browser pages type-check against.
export type { JobChange, LiveAi, LiveDiarization, LiveSegment, LiveStatus };

/** Where job changes go: browsers (socket.io) and claim long-polls. Implemented by the live hub. */
export interface JobEventSink {
  segment(jobId: number, pass: number, segment: LiveSegment): void;
  status(jobId: number, status: LiveStatus): void;
  diarization(jobId: number, update: LiveDiarization): void;
  ai(jobId: number, update: LiveAi): void;
  changed(jobId: number, what: JobChange): void;
}

/**
 * Why a waiting claim long-poll looks again: `job` — one new job was announced (notifyNew: one
 * waiter per group is woken for each job, so a waiter that leases one need not wake the next);
 * `news` — anything else that may have made work claimable (a new worker, a requeued lease, a
 * restart), or the next waiter of a group woken by `found`; `time` — it waited its time out (or its
 * call was cancelled): work that appeared unannounced.
 */
export type WakeReason = 'job' | 'news' | 'time';

/** A claim long-poll waiting for work, filed under its worker's capability key (see `claimGroupKey`). */
interface Waiter {
  wake: (reason: WakeReason) => void;
}

/** How long news for other coordinators is gathered before it is published (see WorkAvailable.publish). */
const PUBLISH_COALESCE_MS = 10;
/** A received message wakes at most this many waiters per group (one per new job it counts). */
const MAX_JOBS_PER_MESSAGE = 10_000;

/**
 * Wakes claim long-polls when work appears. Local waiters are woken in-process; other coordinators
 * hear it through a Redis channel.
 *
 * Three kinds of news, so that a fleet of a thousand idle workers is not woken for every job:
 * - `notifyNew()`: one more unpinned job. It wakes the longest-waiting long-poll of each capability
 *   group, so a burst is taken up by as many workers as it has jobs, one wake (and one claim) per job.
 * - `notifyWorker()`: a new worker (it may make many queued jobs claimable at once). It wakes the
 *   longest waiter of each group too; a long-poll woken by it (or by anything but one job's
 *   announcement) that leases a job wakes the next one of its group (`found`), and so on while
 *   they find work.
 * - `notify()`: anything else (a restart, a new target, requeued leases, a diarization rerun, staged
 *   media): every long-poll looks again, as a pinned job may be for any of them.
 * A long-poll also looks again on its own now and then (`recheckMs`), for work that appears by the
 * clock alone and for news lost with a Redis outage.
 */
export class WorkAvailable {
  /** Waiting long-polls by capability group; the first of a group has waited longest. */
  private readonly groups = new SetMap<string, Waiter>();
  /** Counts news of work (local or from Redis): a long-poll compares it to see whether anything happened. */
  generation = 0;
  /** Per group: announcements of one new job that woke a waiter of that group (see generationOf). */
  private readonly absorbed = new Map<string, number>();
  private subscriber: Redis | null = null;
  /** This process's mark on the messages it publishes. */
  private readonly origin = randomUUID();
  private log: OutageLog | null = null; // set by start()
  /** News not yet published (see publish). */
  private pending = { one: 0, worker: false, all: false };
  private publishTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly redis: Redis,
    private readonly channel: string,
  ) {}

  async start(log: OutageLog) {
    this.log = log;
    this.subscriber = watchRedis(this.redis.duplicate(), log, 'work-available');
    // '<kind> <origin> [count]': 'one' notifyNew (count new jobs), 'worker' notifyWorker, 'all' notify on
    // another coordinator; this process's own messages come back too and are left out (its waiters were
    // woken when it sent them: waking them again made two claims per new job). Anything else (older
    // coordinators sent 'one', '1'): 'one' wakes one waiter per group, the rest every waiter.
    this.subscriber.on('message', (_channel: string, message: string) => {
      const [kind, origin, count] = message.split(' ');
      if (origin !== undefined && origin === this.origin) return;
      if (kind === 'one') for (let i = Math.min(Math.max(Number(count) || 1, 1), MAX_JOBS_PER_MESSAGE); i > 0; i--) this.wakeOnePerGroup('job');
      else if (kind === 'worker') this.wakeOnePerGroup('news');
      else this.wakeAll();
    });
    await this.subscriber.subscribe(this.channel);
  }

  /**
   * The news count as the long-polls of `group` see it: an announcement of one new job that woke
   * one of them is that waiter's to look at, not news to the rest of the group (a worker coming
   * back from a job need not look for it again: in a burst that was a second claim per job).
   * Every other kind of news, and a new job announced while none of the group waited, counts.
   */
  generationOf(group: string): number {
    return this.generation - (this.absorbed.get(group) ?? 0);
  }

  /** Every waiting long-poll looks again (here and on other coordinators). */
  notify() {
    this.wakeAll();
    this.publish('all');
  }

  /** One more job anyone of a group may take: the longest waiter of each group looks (here and elsewhere). */
  notifyNew() {
    this.wakeOnePerGroup('job');
    this.publish('one');
  }

  /** A worker said Hello: the longest waiter of each group looks (here and elsewhere), and passes it on while it finds work. */
  notifyWorker() {
    this.wakeOnePerGroup('news');
    this.publish('worker');
  }

  /** A long-poll of `group` woken by news (not by one job's announcement) leased a job: there may be more, so the next waiter looks. */
  found(group: string) {
    this.groups.first(group)?.wake('news');
  }

  /** How long a long-poll waits before it looks again by itself: 2 s, longer in a large fleet (about 50 looks a second in all). */
  recheckMs(base: number): number {
    return Math.max(base, this.groups.size * 20);
  }

  /** Resolves when work may be available for `group` or after `ms`, whichever comes first; says why. */
  wait(ms: number, group: string, signal?: AbortSignal): Promise<WakeReason> {
    return new Promise((resolve) => {
      const timedOut = () => waiter.wake('time');
      const waiter: Waiter = {
        wake: (reason) => {
          clearTimeout(timer);
          this.groups.delete(group, waiter);
          signal?.removeEventListener('abort', timedOut);
          resolve(reason);
        },
      };
      const timer = setTimeout(timedOut, ms);
      this.groups.add(group, waiter);
      signal?.addEventListener('abort', timedOut, { once: true });
    });
  }

  /** How many long-polls are waiting in this process now (a test waits for its claim to park here). */
  waiting(): number {
    return this.groups.size;
  }

  private wakeAll() {
    this.generation++;
    for (const group of this.groups.keys()) for (const w of this.groups.get(group)) w.wake('news');
  }

  private wakeOnePerGroup(reason: WakeReason) {
    this.generation++;
    for (const group of this.groups.keys()) {
      const first = this.groups.first(group);
      if (!first) continue;
      first.wake(reason);
      if (reason === 'job') this.absorbed.set(group, (this.absorbed.get(group) ?? 0) + 1);
    }
  }

  /**
   * News for other coordinators goes out PUBLISH_COALESCE_MS after the first of it, all of it in one
   * message per kind (`one <origin> <jobs>`): a burst of submissions cost one Redis write per job
   * (a tenth of the coordinator's time at 500 jobs a second). Local waiters are woken at once.
   */
  private publish(kind: 'all' | 'one' | 'worker') {
    if (kind === 'one') this.pending.one += 1;
    else this.pending[kind] = true;
    if (this.publishTimer) return;
    this.publishTimer = setTimeout(() => this.flushPublish(), PUBLISH_COALESCE_MS);
    this.publishTimer.unref();
  }

  private flushPublish() {
    if (this.publishTimer) clearTimeout(this.publishTimer);
    this.publishTimer = null;
    const { one, worker, all } = this.pending;
    this.pending = { one: 0, worker: false, all: false };
    // 'all' wakes every waiter anyway.
    const messages = all ? [`all ${this.origin}`] : [...(one ? [`one ${this.origin} ${one}`] : []), ...(worker ? [`worker ${this.origin}`] : [])];
    for (const message of messages) {
      // Other coordinators' long-polls still look again on their own when this is lost.
      void this.redis.publish(this.channel, message).catch((err: unknown) => this.log?.warn({ err }, 'work-available publish failed'));
    }
  }

  async stop() {
    if (this.publishTimer) this.flushPublish();
    await this.subscriber?.quit().catch(() => undefined);
    this.subscriber = null;
  }
}
