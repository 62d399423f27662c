import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, Proc } from './processes.js';

/**
 * A real IRC server for tests: Debian's ngIRCd in the foreground (`-n -f <conf>`) as a child
 * process, from a temp directory holding its config, MOTD and PID file, listening on a free port
 * of 127.0.0.1 only. No PAM, DNS or ident lookups (they would slow every connect), no per-address
 * connection limit, nicks up to 30 characters. `stop()` and `start()` restart it on the same port.
 *
 * ngIRCd never keeps running as root: started as root it switches to `ServerUID`, and to
 * "nobody" when that is root or unset. So as root the config names nobody explicitly and the
 * temp directory is handed to nobody, which must write the PID file there after the switch.
 */

export const NGIRCD = process.env.NGIRCD_PATH ?? '/usr/sbin/ngircd';

export interface NgircdServer {
  host: '127.0.0.1';
  port: number;
  /** Server name (what clients see as the server prefix). */
  name: string;
  dir: string;
  /** ngIRCd's log lines so far (all runs). */
  logs(): string[];
  /** Kills the daemon (SIGTERM, SIGKILL after 5 s); the directory stays for `start()`. */
  stop(): Promise<void>;
  /** Starts it again on the same port and waits until the port accepts connections. */
  start(): Promise<void>;
  /** stop() and remove the directory. */
  close(): Promise<void>;
}

/** uid/gid of "nobody" from /etc/passwd (65534 when it cannot be read). */
function nobody(): { uid: number; gid: number } {
  try {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('nobody:'));
    const f = line?.split(':');
    if (f && f[2] && f[3]) return { uid: Number(f[2]), gid: Number(f[3]) };
  } catch {
    // fall through
  }
  return { uid: 65534, gid: 65534 };
}

function probe(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => {
      s.destroy();
      resolve(false);
    });
  });
}

export async function startNgircd(opts: { name?: string } = {}): Promise<NgircdServer> {
  if (!existsSync(NGIRCD)) throw new Error(`ngircd is not installed at ${NGIRCD} (apt-get install ngircd, or set NGIRCD_PATH)`);
  const name = opts.name ?? 'irc.sonar.test';
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'sonar-ngircd-'));
  const conf = path.join(dir, 'ngircd.conf');
  const asRoot = process.getuid?.() === 0;
  const runAs = asRoot ? nobody() : null;
  const runs: Proc[] = [];
  let proc: Proc | null = null;
  const logs = () => runs.flatMap((r) => r.lines);

  const config = [
    '[Global]',
    `\tName = ${name}`,
    '\tInfo = sonar test server',
    '\tAdminInfo1 = sonar tests',
    '\tAdminInfo2 = loopback only',
    '\tAdminEMail = tests@sonar.invalid',
    '\tListen = 127.0.0.1',
    `\tPorts = ${port}`,
    `\tMotdFile = ${path.join(dir, 'ngircd.motd')}`,
    `\tPidFile = ${path.join(dir, 'ngircd.pid')}`,
    ...(runAs ? [`\tServerUID = ${runAs.uid}`, `\tServerGID = ${runAs.gid}`] : []),
    '[Limits]',
    '\tMaxConnectionsIP = 0',
    '\tMaxNickLength = 30',
    '\tMaxJoins = 0',
    '\tPingTimeout = 120',
    '\tPongTimeout = 20',
    '[Options]',
    '\tPAM = no',
    '\tDNS = no',
    '\tIdent = no',
    '',
  ].join('\n');

  async function start(): Promise<void> {
    if (proc && proc.child.exitCode === null && proc.child.signalCode === null) return;
    const child = spawn(NGIRCD, ['-n', '-f', conf], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const p = new Proc(child);
    proc = p;
    runs.push(p);
    let exited = false;
    let spawnError: Error | null = null;
    child.once('error', (err) => ((spawnError = err), (exited = true)));
    void p.exited.then(() => (exited = true));
    const deadline = Date.now() + 10_000;
    while (!(await probe(port))) {
      if (exited) throw new Error(`ngircd exited during start${spawnError ? ` (${(spawnError as Error).message})` : ''}:\n${logs().join('\n')}`);
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`ngircd did not accept connections on 127.0.0.1:${port} within 10 s:\n${logs().join('\n')}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async function stop(): Promise<void> {
    const p = proc;
    if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
    const kill = setTimeout(() => p.child.kill('SIGKILL'), 5_000);
    await p.stop('SIGTERM');
    clearTimeout(kill);
  }

  try {
    await writeFile(conf, config);
    await writeFile(path.join(dir, 'ngircd.motd'), 'sonar test server\n');
    if (runAs) await chown(dir, runAs.uid, runAs.gid);
    await start();
  } catch (err) {
    await stop().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    throw err;
  }

  return {
    host: '127.0.0.1',
    port,
    name,
    dir,
    logs,
    stop,
    start,
    async close() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
