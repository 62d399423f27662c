import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, Proc } from './processes.js';

/**
 * A real SpamAssassin spamd for tests (Debian's `spamd` with the rules of `spamassassin`): a child
 * process on a free port of 127.0.0.1, local tests only (`-L`: no DNS blocklists — there is no
 * network), no user configuration, one child. Ready once it answers a SPAMC PING.
 */
export const SPAMD = process.env.SPAMD_PATH ?? '/usr/sbin/spamd';

export interface SpamdServer {
  port: number;
  stop(): Promise<void>;
}

/** One SPAMC PING: true when spamd answers PONG. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    let answer = '';
    s.setTimeout(2_000, () => {
      s.destroy();
      resolve(false);
    });
    s.on('connect', () => s.write('PING SPAMC/1.5\r\n\r\n'));
    s.on('data', (d: Buffer) => (answer += d.toString()));
    s.on('end', () => resolve(/PONG/.test(answer)));
    s.on('error', () => resolve(false));
  });
}

export async function startSpamd(): Promise<SpamdServer> {
  if (!existsSync(SPAMD)) throw new Error(`spamd is not installed at ${SPAMD} (apt-get install spamassassin spamd, or set SPAMD_PATH)`);
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'sonar-spamd-'));
  const asRoot = process.getuid?.() === 0;
  const child = spawn(
    SPAMD,
    [
      `--listen=127.0.0.1:${port}`,
      '--allowed-ips=127.0.0.1',
      '--local',
      '--nouser-config',
      '--max-children=1',
      '--syslog=stderr',
      `--pidfile=${path.join(dir, 'spamd.pid')}`,
      // spamd refuses to run as root without a user to switch to
      ...(asRoot ? ['--username=nobody'] : []),
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, HOME: dir } },
  );
  const proc = new Proc(child);
  let exited = false;
  void proc.exited.then(() => (exited = true));
  // Loading the rules takes a few seconds (more on a loaded machine).
  const deadline = Date.now() + 60_000;
  while (!(await ping(port))) {
    if (exited) throw new Error(`spamd exited during start:\n${proc.lines.join('\n')}`);
    if (Date.now() > deadline) {
      await proc.stop('SIGKILL');
      throw new Error(`spamd did not answer PING on 127.0.0.1:${port} within 60 s:\n${proc.lines.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    async stop() {
      await proc.stop('SIGTERM');
      await rm(dir, { recursive: true, force: true });
    },
  };
}
