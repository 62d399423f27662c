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

/** A claim long-poll waiting for work, filed under its worker's capability key (see `claimGroupKey`). */
interface Waiter {
  wake: () => void;
}

/**
 * Wakes claim long-polls when work appears. Local waiters are woken in-process; other coordinators
 * hear it through a Redis channel.
 *
 * Two kinds of news, so that a fleet of a thousand idle workers is not woken for every job:
 * - `notifyNew()`: one more unpinned job (or a new worker). It wakes the longest-waiting long-poll of
 *   each capability group; a woken long-poll that leases a job wakes the next one of its group
 *   (`found`), so a burst is taken up by as many workers as it needs, one wake per job.
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
  private subscriber: Redis | null = null;
  private log: OutageLog | null = null; // set by start()

  constructor(
    private readonly redis: Redis,
    private readonly channel: string,
  ) {}

  async start(log: OutageLog) {
    this.log = log;
    this.subscriber = watchRedis(this.redis.duplicate(), log, 'work-available');
    // 'one': notifyNew on another coordinator; anything else (older coordinators sent '1'): notify.
    this.subscriber.on('message', (_channel: string, message: string) => (message === 'one' ? this.wakeOnePerGroup() : this.wakeAll()));
    await this.subscriber.subscribe(this.channel);
  }

  /** Every waiting long-poll looks again (here and on other coordinators). */
  notify() {
    this.wakeAll();
    this.publish('all');
  }

  /** One more job anyone of a group may take: the longest waiter of each group looks (here and elsewhere). */
  notifyNew() {
    this.wakeOnePerGroup();
    this.publish('one');
  }

  /** A woken long-poll of `group` leased a job: there may be more, so the next waiter of the group looks. */
  found(group: string) {
    this.groups.first(group)?.wake();
  }

  /** How long a long-poll waits before it looks again by itself: 2 s, longer in a large fleet (about 50 looks a second in all). */
  recheckMs(base: number): number {
    return Math.max(base, this.groups.size * 20);
  }

  /** Resolves when work may be available for `group` or after `ms`, whichever comes first. */
  wait(ms: number, group: string, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const waiter: Waiter = {
        wake: () => {
          clearTimeout(timer);
          this.groups.delete(group, waiter);
          signal?.removeEventListener('abort', waiter.wake);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, ms);
      this.groups.add(group, waiter);
      signal?.addEventListener('abort', waiter.wake, { once: true });
    });
  }

  /** How many long-polls are waiting in this process now (a test waits for its claim to park here). */
  waiting(): number {
    return this.groups.size;
  }

  private wakeAll() {
    this.generation++;
    for (const group of this.groups.keys()) for (const w of this.groups.get(group)) w.wake();
  }

  private wakeOnePerGroup() {
    this.generation++;
    for (const group of this.groups.keys()) this.groups.first(group)?.wake();
  }

  private publish(message: 'all' | 'one') {
    // Other coordinators' long-polls still look again on their own when this is lost.
    void this.redis.publish(this.channel, message).catch((err: unknown) => this.log?.warn({ err }, 'work-available publish failed'));
  }

  async stop() {
    await this.subscriber?.quit().catch(() => undefined);
    this.subscriber = null;
  }
}
