import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, it, vi } from 'vitest';
import {
  generateTsigKey,
  soaAnswers,
  startNamedProcess,
  superviseNamed,
  zoneText,
  type NamedProcess,
  type NamedSupervisor,
} from '../../coordinator/src/dns/named-runtime.js';

/** The quick start's named supervision (superviseNamed) on a real named: SIGKILL it, it comes back on its port, with backoff, logged. */
let dir: string;
let supervisor: NamedSupervisor | undefined;

afterAll(async () => {
  await supervisor?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it('a killed named is noticed and started again with doubling delays', async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sonar-named-sup-'));
  const keyFile = path.join(dir, 'tsig.key');
  const zoneFile = path.join(dir, 'db.sup.test');
  const { name: keyName } = await generateTsigKey('sup-key', keyFile);
  await writeFile(zoneFile, zoneText({ name: 'sup.test', records: [{ name: 'www.sup.test', type: 'A', rdata: '10.9.9.9' }] }));
  const opts = { dir, keyFile, keyName, zones: [{ name: 'sup.test', file: zoneFile }] };
  const first = await startNamedProcess(opts);
  const exits: Array<{ signal: string | null; delayMs: number }> = [];
  let restarted: (p: NamedProcess) => void = () => {};
  const nextRestart = () => new Promise<NamedProcess>((resolve) => (restarted = resolve));
  supervisor = superviseNamed(
    first,
    () => startNamedProcess({ ...opts, port: first.port }),
    { onExit: (e) => exits.push({ signal: e.signal, delayMs: e.delayMs }), onRestart: (p) => restarted(p) },
    { initialMs: 50, maxMs: 1000, resetAfterMs: 60_000 },
  );

  let back = nextRestart();
  first.child.kill('SIGKILL');
  const second = await back;
  expect(second.child.pid).not.toBe(first.child.pid);
  expect(await soaAnswers(first.port, 'sup.test')).toBe(true);

  back = nextRestart();
  second.child.kill('SIGKILL');
  const third = await back;
  expect(await soaAnswers(first.port, 'sup.test')).toBe(true);
  expect(exits).toEqual([
    { signal: 'SIGKILL', delayMs: 50 },
    { signal: 'SIGKILL', delayMs: 100 },
  ]);
  expect(supervisor.current()).toBe(third);
}, 60_000);

it('after release() (the quick start is shutting down) an exit is expected: not logged as a crash, not restarted', async () => {
  const own = await mkdtemp(path.join(tmpdir(), 'sonar-named-rel-'));
  try {
    const keyFile = path.join(own, 'tsig.key');
    const zoneFile = path.join(own, 'db.rel.test');
    const { name: keyName } = await generateTsigKey('rel-key', keyFile);
    await writeFile(zoneFile, zoneText({ name: 'rel.test', records: [] }));
    const opts = { dir: own, keyFile, keyName, zones: [{ name: 'rel.test', file: zoneFile }] };
    const first = await startNamedProcess(opts);
    const exits: unknown[] = [];
    let restarts = 0;
    const released = superviseNamed(
      first,
      async () => {
        restarts++;
        return startNamedProcess({ ...opts, port: first.port });
      },
      { onExit: (e) => exits.push(e) },
      { initialMs: 10 },
    );
    // The supervisor's settle window and backoff run on vitest's fake clock from here: "nothing
    // happens" is then checked by running every timer the exit set, not by sleeping past them (a
    // sleep proves nothing on a machine slow enough that the timers have not fired yet).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      // A terminal's Ctrl-C reaches named (SIGINT, a clean exit) about when our own handler releases it.
      first.child.kill('SIGINT');
      released.release();
      await first.exited;
      // The supervisor saw the exit first (its handler was registered before this await) and set its settle timer.
      expect(vi.getTimerCount()).toBeGreaterThanOrEqual(1);
      await vi.runAllTimersAsync();
    } finally {
      vi.useRealTimers();
    }
    expect(exits).toEqual([]);
    expect(restarts).toBe(0);
    expect(await soaAnswers(first.port, 'rel.test')).toBe(false);
  } finally {
    await rm(own, { recursive: true, force: true });
  }
}, 60_000);
