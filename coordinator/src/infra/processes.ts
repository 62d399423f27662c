/**
 * Looking at and stopping processes by identity (Linux /proc): a PID alone is not an identity
 * once its process has exited, because the kernel hands the number to the next process. A record
 * keeps the process's start time (field 22 of /proc/<pid>/stat, fixed for a process's life) and
 * fragments of its command line; every signal is sent only after both still match.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

export interface ProcInfo {
  pid: number;
  ppid: number;
  /** R, S, D, Z (zombie: exited, not yet reaped), ... */
  state: string;
  /** Clock ticks after boot at which the process started. */
  startTime: number;
  argv: string[];
}

/** What /proc says about `pid`, or null when there is no such process (or no /proc). */
export function procInfo(pid: number): ProcInfo | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (argv.at(-1) === '') argv.pop();
    return { pid, state: fields[0] ?? '?', ppid: Number(fields[1]), startTime: Number(fields[19]), argv };
  } catch {
    return null;
  }
}

/** True for a process that exists and has not exited (a zombie has exited: only its entry is left). */
export function isRunning(p: ProcInfo | null): p is ProcInfo {
  return p !== null && p.state !== 'Z' && p.state !== 'X';
}

/** The base name of the program a process runs (`/usr/sbin/named` -> `named`). */
export const programName = (p: ProcInfo) => path.basename(p.argv[0] ?? '');

/**
 * True when `p`'s parent is a live Node.js process: the processes this module looks after are
 * started by Node (the quick start, the test harness); a parent that is init or a subreaper
 * means the starter is gone and the process is an orphan.
 */
export function hasLiveNodeParent(p: ProcInfo): boolean {
  const parent = procInfo(p.ppid);
  return isRunning(parent) && /^node(js)?(\d+)?$/.test(programName(parent));
}

export interface ProcessRecord {
  /** For logs: postgres, named, redis, worker. */
  name: string;
  pid: number;
  startTime: number;
  /** The signal that stops it cleanly (PostgreSQL: SIGINT, its fast shutdown). */
  signal: NodeJS.Signals;
  /** Fragments its command line (arguments joined by spaces) must contain. */
  match: string[];
  /** How long after `signal` it may take before SIGKILL. */
  graceMs?: number;
}

/** A record of the running process `pid`, or null when it is not running. */
export function recordProcess(pid: number | undefined, r: Omit<ProcessRecord, 'pid' | 'startTime'>): ProcessRecord | null {
  const p = pid === undefined ? null : procInfo(pid);
  return isRunning(p) ? { ...r, pid: p.pid, startTime: p.startTime } : null;
}

/** True while the recorded process is still running (and the PID was not reused by another). */
export function isSameProcess(r: ProcessRecord): boolean {
  const p = procInfo(r.pid);
  if (!isRunning(p) || p.startTime !== r.startTime) return false;
  const cmdline = p.argv.join(' ');
  return r.match.every((m) => cmdline.includes(m));
}

/** Resolves true once `done()` holds, false after `timeoutMs`. */
export async function waitFor(done: () => boolean, timeoutMs: number, everyMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return true;
}

/**
 * Stops the recorded process: its clean-stop signal, then SIGKILL after its grace period; resolves
 * once it is gone. Returns false (and signals nothing) when that process is not running any more.
 */
export async function stopProcess(r: ProcessRecord): Promise<boolean> {
  const send = (signal: NodeJS.Signals) => {
    if (!isSameProcess(r)) return;
    try {
      process.kill(r.pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  };
  if (!isSameProcess(r)) return false;
  send(r.signal);
  if (await waitFor(() => !isSameProcess(r), r.graceMs ?? 15_000)) return true;
  send('SIGKILL');
  await waitFor(() => !isSameProcess(r), 10_000);
  return true;
}
