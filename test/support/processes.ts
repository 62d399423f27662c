import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const repoRoot = path.resolve(import.meta.dirname, '../..');

/** A child process whose output is collected line by line, with waits on what it prints. */
export class Proc {
  readonly lines: string[] = [];
  private waiters: Array<{ re: RegExp; resolve: (line: string) => void }> = [];
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    const onData = (buf: Buffer) => {
      for (const line of buf.toString().split('\n').filter(Boolean)) {
        this.lines.push(line);
        this.waiters = this.waiters.filter((w) => (w.re.test(line) ? (w.resolve(line), false) : true));
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  waitFor(re: RegExp, timeoutMs = 15_000): Promise<string> {
    const hit = this.lines.find((l) => re.test(l));
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${re}; output:\n${this.lines.join('\n')}`)), timeoutMs);
      this.waiters.push({
        re,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
      });
    });
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }
}

export function startNode(script: string, args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, [path.join(repoRoot, script), ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Proc(child);
}

export { freePort } from '../../coordinator/src/infra/ports.js';
