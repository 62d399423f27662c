import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import type { JobChange, LiveAi, LiveDiarization, LiveSegment, LiveStatus } from '@sonar/shared/live-events';
import { watchRedis, type OutageLog } from '../../infra/redis-watch.js';

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
 * Wakes claim long-polls when work appears. Local waiters get an in-process event; other
 * coordinators hear it through a Redis channel.
 */
export class WorkAvailable {
  private readonly emitter = new EventEmitter();
  private subscriber: Redis | null = null;
  private log: OutageLog | null = null; // set by start()

  constructor(
    private readonly redis: Redis,
    private readonly channel: string,
  ) {
    this.emitter.setMaxListeners(0);
  }

  async start(log: OutageLog) {
    this.log = log;
    this.subscriber = watchRedis(this.redis.duplicate(), log, 'work-available');
    this.subscriber.on('message', () => this.emitter.emit('work'));
    await this.subscriber.subscribe(this.channel);
  }

  notify() {
    this.emitter.emit('work');
    // Other coordinators' long-polls still wake on their own timeout when this is lost.
    void this.redis.publish(this.channel, '1').catch((err: unknown) => this.log?.warn({ err }, 'work-available publish failed'));
  }

  /** Resolves when work may be available or after `ms`, whichever comes first. */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.emitter.off('work', done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.emitter.once('work', done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** How many long-polls are waiting in this process now (a test waits for its claim to park here). */
  waiting(): number {
    return this.emitter.listenerCount('work');
  }

  async stop() {
    await this.subscriber?.quit().catch(() => undefined);
    this.subscriber = null;
  }
}
