/**
 * Keeps the quick start's child processes from outliving it, and cleans up after a run that was
 * killed before it could stop them.
 *
 * - A state file (DATA_DIR/run/quickstart.json) names the quick start and each child it started,
 *   by PID, start time and command line (processes.ts). A new run stops the children an earlier,
 *   dead run left behind, and refuses to start while that run is still alive.
 * - A detached watchdog process (watchdog.ts) is told about each child and stops them all when
 *   the quick start exits in any way, SIGKILL included.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isSameProcess, recordProcess, stopProcess, type ProcessRecord } from './processes.js';

interface GuardState {
  owner: ProcessRecord;
  watchdog: ProcessRecord | null;
  children: ProcessRecord[];
}

export class AnotherRunError extends Error {}

export class ChildGuard {
  private readonly children = new Map<number, ProcessRecord>();

  private constructor(
    private readonly stateFile: string,
    private readonly owner: ProcessRecord | null,
    private readonly watchdog: ChildProcess | null,
    private readonly watchdogRecord: ProcessRecord | null,
  ) {}

  /**
   * Stops what an earlier run recorded in `stateFile` (when that run is gone; throws
   * AnotherRunError when it is alive), starts the watchdog and records this run.
   */
  static async open(opts: { stateFile: string; log: (msg: string) => void; ownerMatch: string }): Promise<ChildGuard> {
    const { stateFile, log } = opts;
    const owner = recordProcess(process.pid, { name: 'quickstart', signal: 'SIGTERM', match: [opts.ownerMatch] });
    if (!owner) {
      log('no /proc (not Linux): child processes are not guarded; stop the quick start with Ctrl-C, not kill -9');
      return new ChildGuard(stateFile, null, null, null);
    }
    mkdirSync(path.dirname(stateFile), { recursive: true });
    const previous = readState(stateFile);
    if (previous) {
      if (isSameProcess(previous.owner)) {
        throw new AnotherRunError(`another quick start (pid ${previous.owner.pid}) is running with this data folder; stop it first (state in ${stateFile})`);
      }
      for (const child of previous.children) {
        if (!isSameProcess(child)) continue;
        log(`stopping ${child.name} (pid ${child.pid}) left running by an earlier quick start`);
        await stopProcess(child);
      }
    }

    const logFd = openSync(path.join(path.dirname(stateFile), 'watchdog.log'), 'a');
    const watchdog = spawn(process.execPath, [fileURLToPath(new URL('./watchdog.js', import.meta.url))], {
      // Its own session: a Ctrl-C in the terminal reaches the quick start, which stops the
      // children in order; the watchdog only acts once the quick start is gone.
      detached: true,
      stdio: ['pipe', 'ignore', logFd],
    });
    closeSync(logFd);
    await new Promise<void>((resolve, reject) => {
      watchdog.once('spawn', resolve);
      watchdog.once('error', reject);
    });
    watchdog.unref();
    // Writes to a watchdog that died fail; the children are then only recorded in the state file.
    watchdog.stdin!.on('error', () => undefined);
    const watchdogRecord = recordProcess(watchdog.pid, { name: 'watchdog', signal: 'SIGTERM', match: ['watchdog'] });
    const guard = new ChildGuard(stateFile, owner, watchdog, watchdogRecord);
    guard.save();
    return guard;
  }

  /** Records a started child: the watchdog stops it if this process dies. Ignored when it already exited. */
  watch(pid: number | undefined, r: Omit<ProcessRecord, 'pid' | 'startTime'>): ProcessRecord | null {
    const record = this.owner ? recordProcess(pid, r) : null;
    if (!record) return null;
    this.children.set(record.pid, record);
    this.watchdog?.stdin?.write(`${JSON.stringify({ watch: record })}\n`);
    this.save();
    return record;
  }

  /** The child was stopped (or exited): nothing is left to do for it. */
  forget(pid: number | undefined) {
    if (pid === undefined || !this.children.delete(pid)) return;
    this.watchdog?.stdin?.write(`${JSON.stringify({ forget: pid })}\n`);
    this.save();
  }

  /** After a clean stop: no state is left and the watchdog exits (with nothing left to stop). */
  close() {
    if (!this.owner) return;
    rmSync(this.stateFile, { force: true });
    this.watchdog?.stdin?.end();
  }

  private save() {
    if (!this.owner) return;
    const state: GuardState = { owner: this.owner, watchdog: this.watchdogRecord, children: [...this.children.values()] };
    const tmp = `${this.stateFile}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`);
    renameSync(tmp, this.stateFile);
  }
}

function readState(file: string): GuardState | null {
  if (!existsSync(file)) return null;
  try {
    const s = JSON.parse(readFileSync(file, 'utf8')) as GuardState;
    return s && typeof s.owner?.pid === 'number' && Array.isArray(s.children) ? s : null;
  } catch {
    return null; // a torn or foreign file: nothing in it can be trusted to be ours
  }
}
