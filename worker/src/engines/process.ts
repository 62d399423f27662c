import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import path from 'node:path';
import { TranscriptionCancelled } from './types.js';

/** Grace period between SIGTERM and SIGKILL when a job is cancelled. */
export const KILL_GRACE_MS = 2000;

export { findExecutable } from '@sonar/shared';

/** Calls `onLine` for every complete line of a stream as soon as it arrives ('\n' or '\r' ends a line). */
function readLines(stream: Readable, onLine: (line: string) => void): { flush(): void } {
  let buffered = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffered += chunk;
    let idx: number;
    while ((idx = buffered.search(/[\r\n]/)) >= 0) {
      const line = buffered.slice(0, idx);
      buffered = buffered.slice(idx + 1);
      onLine(line);
    }
  });
  return {
    flush() {
      if (buffered) {
        const line = buffered;
        buffered = '';
        onLine(line);
      }
    },
  };
}

export interface EngineProcessOptions {
  /** Engine name, for error messages. */
  name: string;
  command: string;
  args: string[];
  signal: AbortSignal;
  onStdoutLine: (line: string) => void;
  onStderrLine?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

export interface EngineProcessResult {
  stderrTail: string;
}

/**
 * Runs one engine process and streams its stdout line by line.
 *
 * - Resolves when the process exits 0 and all its output has been handed to the callbacks.
 * - Rejects with an Error naming the engine, its exit status and the tail of its stderr otherwise.
 * - When `signal` aborts: stops delivering lines, sends SIGTERM, then SIGKILL after KILL_GRACE_MS,
 *   and rejects with TranscriptionCancelled as soon as the process has exited, so no engine
 *   process outlives the rejection.
 * - A callback that throws stops the process the same way and rejects with that error.
 */
export function runEngineProcess(opts: EngineProcessOptions): Promise<EngineProcessResult> {
  return new Promise((resolve, reject) => {
    if (opts.signal.aborted) {
      reject(new TranscriptionCancelled(`${opts.name}: cancelled before start`));
      return;
    }
    const child = spawn(opts.command, opts.args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: opts.env ?? process.env,
    });

    let stderrTail = '';
    let stopping: Error | null = null;
    let settled = false;
    let killTimer: NodeJS.Timeout | null = null;

    const finish = (err: Error | null) => {
      if (settled) return;
      settled = true;
      opts.signal.removeEventListener('abort', onAbort);
      if (killTimer) clearTimeout(killTimer);
      if (err) reject(err);
      else resolve({ stderrTail });
    };

    const stop = (reason: Error) => {
      if (stopping) return;
      stopping = reason;
      if (child.exitCode !== null || child.signalCode !== null) {
        finish(reason);
        return;
      }
      child.kill('SIGTERM');
      killTimer = setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }, KILL_GRACE_MS);
    };

    const onAbort = () => stop(new TranscriptionCancelled(`${opts.name}: cancelled`));
    opts.signal.addEventListener('abort', onAbort, { once: true });

    const guarded = (fn: ((line: string) => void) | undefined) => (line: string) => {
      if (stopping || !fn) return;
      try {
        fn(line);
      } catch (err) {
        stop(err instanceof Error ? err : new Error(String(err)));
      }
    };
    const out = readLines(child.stdout, guarded(opts.onStdoutLine));
    const onErrLine = guarded(opts.onStderrLine);
    const errLines = readLines(child.stderr, (line) => {
      stderrTail = (stderrTail + line + '\n').slice(-4000);
      onErrLine(line);
    });

    child.on('error', (err) => {
      // spawn failure (ENOENT, EACCES): there is no process to wait for.
      finish(new Error(`${opts.name}: cannot run ${opts.command}: ${err.message}`));
    });
    // 'exit' rather than 'close' once we are stopping: a grandchild holding the pipes must not delay us.
    child.on('exit', () => {
      if (stopping) finish(stopping);
    });
    child.on('close', (code, sig) => {
      if (stopping) {
        finish(stopping);
        return;
      }
      out.flush();
      errLines.flush();
      if (stopping) {
        finish(stopping);
      } else if (code === 0) {
        finish(null);
      } else {
        const status = code !== null ? `exited with code ${code}` : `was killed by ${sig}`;
        const detail = stderrTail.trim().split('\n').slice(-8).join('\n');
        finish(new Error(`${opts.name}: ${path.basename(opts.command)} ${status}${detail ? `:\n${detail}` : ''}`));
      }
    });
  });
}
