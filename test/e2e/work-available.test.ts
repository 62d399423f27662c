import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { WorkAvailable, type WakeReason } from '../../coordinator/src/speech/jobs/job-events.js';

/**
 * The work-available channel between two coordinators on a real Redis: each new job wakes one
 * waiter per group here at once and, through one coalesced message, one per group on the other
 * coordinator; a coordinator's own messages do not wake its waiters a second time.
 */
const channel = `test:${randomBytes(4).toString('hex')}:speech:work`;
let redis: Redis;
let a: WorkAvailable;
let b: WorkAvailable;

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'));
  a = new WorkAvailable(redis, channel);
  b = new WorkAvailable(redis, channel);
  const log = pino({ level: 'silent' });
  await a.start(log);
  await b.start(log);
});

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await redis?.quit();
});

/** `n` long polls of `group` on `work`, each resolving with why it woke (or 'time' after 10 s). */
function waiters(work: WorkAvailable, group: string, n: number): Array<Promise<WakeReason>> {
  return Array.from({ length: n }, () => work.wait(10_000, group));
}

it('three new jobs wake three waiters here and three on the other coordinator, once each', async () => {
  const here = waiters(a, 'g', 4);
  const there = waiters(b, 'g', 4);
  for (let i = 0; i < 3; i++) a.notifyNew();
  // Here at once: three of the four.
  expect(a.waiting()).toBe(1);
  // There through one message: three of the four, each for a job.
  await expect.poll(() => b.waiting(), { timeout: 5_000, interval: 10 }).toBe(1);
  expect(await Promise.all(there.slice(0, 3))).toEqual(['job', 'job', 'job']);
  expect(await Promise.all(here.slice(0, 3))).toEqual(['job', 'job', 'job']);
  // The message came back to `a` too and was left out: its fourth waiter still waits.
  const echo = a.wait(10_000, 'g');
  b.notify(); // wakes b's own waiter at once and every waiter on a through Redis
  expect(await there[3]).toBe('news');
  expect(await Promise.all([here[3], echo])).toEqual(['news', 'news']);
});
