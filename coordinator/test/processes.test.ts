import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stopStalePostmaster } from '../src/infra/embedded-postgres.js';
import { isSameProcess, procInfo, recordProcess, stopProcess } from '../src/infra/processes.js';

/** Identity checks on real processes: a record names one process, never whoever reuses its PID. */
const dir = mkdtempSync(path.join(tmpdir(), 'sonar-processes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A child that ignores SIGTERM until told, so stopProcess has to escalate. */
function stubborn() {
  const child = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000); console.log('ready')"], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return new Promise<typeof child>((resolve) => child.stdout.once('data', () => resolve(child)));
}

describe('process records', () => {
  it('match the process by start time and command line, not by PID alone', () => {
    const me = recordProcess(process.pid, { name: 'me', signal: 'SIGTERM', match: [process.argv[1] ?? 'node'] })!;
    expect(me.startTime).toBe(procInfo(process.pid)!.startTime);
    expect(isSameProcess(me)).toBe(true);
    expect(isSameProcess({ ...me, startTime: me.startTime + 1 })).toBe(false); // a reused PID
    expect(isSameProcess({ ...me, match: ['not-in-this-command-line'] })).toBe(false);
  });

  it('stopProcess escalates to SIGKILL after the grace period, and leaves a changed process alone', async () => {
    const child = await stubborn();
    const exited = new Promise((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    const record = recordProcess(child.pid, { name: 'stub', signal: 'SIGTERM', match: ['ready'], graceMs: 300 })!;
    expect(await stopProcess({ ...record, startTime: record.startTime - 1 })).toBe(false);
    expect(isSameProcess(record)).toBe(true);
    expect(await stopProcess(record)).toBe(true);
    expect(await exited).toBe('SIGKILL');
  });

  it('a postmaster.pid naming an unrelated live process is removed, and that process is not signalled', async () => {
    const pgDir = path.join(dir, 'postgres');
    rmSync(pgDir, { recursive: true, force: true });
    mkdirSync(pgDir);
    const pidFile = path.join(pgDir, 'postmaster.pid');
    writeFileSync(pidFile, `${process.pid}\n${pgDir}\n1700000000\n54329\n\n127.0.0.1\n  0 0\nready\n`);
    const notices: string[] = [];
    await stopStalePostmaster(pgDir, (l) => notices.push(l));
    expect(existsSync(pidFile)).toBe(false);
    expect(notices.join('\n')).toMatch(/stale .*postmaster\.pid/);
  });
});
