/**
 * Running a real BIND `named` as a child process on 127.0.0.1 and a high port: the quick start's
 * local DNS master and the tests' (test/support/bind.ts). Writes the TSIG key (tsig-keygen),
 * zone files and named.conf, starts named in the foreground, waits until it answers SOA over TCP
 * for the first zone, and stops it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmod, chown, readFile, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';
import dnsPacket from 'dns-packet';
import { findExecutable } from '@sonar/shared';
import { freePort } from '../infra/ports.js';
import { hasLiveNodeParent, isRunning, procInfo, programName, stopProcess } from '../infra/processes.js';

export const BIND_INSTALL_HINT = 'apt-get install bind9 bind9-dnsutils';

export interface ZoneRecordSpec {
  /** Owner: absolute (`www.example.test`, trailing dot optional) or `@`. */
  name: string;
  type: string;
  /** Zone-file syntax: names in rdata need a trailing dot to be absolute. */
  rdata: string;
  ttl?: number;
}

export interface ZoneSpec {
  name: string;
  records?: ZoneRecordSpec[];
  serial?: number;
}

export interface TsigKeyInfo {
  name: string;
  secret: string;
  algorithm: 'hmac-sha256';
}

/** A BIND tool from PATH, else from the sbin directories a non-root PATH often lacks (named, tsig-keygen). */
export function bindTool(name: string): string {
  return findBindTool(name) ?? name; // let the spawn fail with ENOENT and the install hint
}

export function findBindTool(name: string): string | null {
  return findExecutable(name, ['/usr/sbin', '/usr/local/sbin', '/sbin']);
}

/** True when `named` and `tsig-keygen` are installed. */
export const bindInstalled = () => findBindTool('named') !== null && findBindTool('tsig-keygen') !== null;

export function runTool(cmd: string, args: string[], input?: string, timeout = 30_000): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) {
        const code = (err as NodeJS.ErrnoException).code;
        const hint = code === 'ENOENT' ? ` (${cmd} is not installed: ${BIND_INSTALL_HINT}, or run bash .ci/run)` : '';
        reject(new Error(`${cmd} ${args.join(' ')} failed${hint}: ${err.message}\n${stdout}\n${stderr}`));
      } else resolve({ stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** uid/gid of the `bind` user when we are root (named drops privileges to it); null otherwise. */
export async function bindUser(): Promise<{ uid: number; gid: number } | null> {
  if (process.getuid?.() !== 0) return null;
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  const line = passwd.split('\n').find((l) => l.startsWith('bind:'));
  if (!line) return null;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Runs `tsig-keygen -a hmac-sha256 <name>` and writes its key clause to `file`. */
export async function generateTsigKey(keyName: string, file: string): Promise<TsigKeyInfo> {
  const text = (await runTool(bindTool('tsig-keygen'), ['-a', 'hmac-sha256', keyName])).stdout;
  const key = parseKeyClause(text);
  await writeFile(file, text, { mode: 0o600 });
  return key;
}

/** The name and secret of a `key "name" { algorithm hmac-sha256; secret "…"; };` clause. */
export function parseKeyClause(text: string): TsigKeyInfo {
  const name = /key\s+"?([^"\s{]+)"?\s*\{/.exec(text)?.[1];
  const secret = /secret\s+"([^"]+)"/.exec(text)?.[1];
  if (!name || !secret) throw new Error(`could not read the key name and secret from:\n${text}`);
  return { name, secret, algorithm: 'hmac-sha256' };
}

export function zoneText(zone: ZoneSpec): string {
  const z = zone.name.replace(/\.$/, '');
  const abs = (n: string) => (n === '@' || n.endsWith('.') ? n : `${n}.`);
  const lines = [
    '$TTL 300',
    `@ IN SOA ns1.${z}. hostmaster.${z}. ${zone.serial ?? 1} 3600 600 86400 300`,
    `@ IN NS ns1.${z}.`,
    `ns1.${z}. IN A 127.0.0.1`,
    ...(zone.records ?? []).map((r) => `${abs(r.name)} ${r.ttl ?? ''} IN ${r.type} ${r.rdata}`),
  ];
  return `${lines.join('\n')}\n`;
}

export interface NamedConfOptions {
  dir: string;
  port: number;
  keyFile: string;
  keyName: string;
  zones: Array<{ name: string; file: string }>;
}

/** A primary-only named.conf: loopback, no recursion, no rndc, transfers and updates by the key. */
export function namedConf(o: NamedConfOptions): string {
  return (
    [
      `include "${o.keyFile}";`,
      'options {',
      `  directory "${o.dir}";`,
      `  pid-file "${path.join(o.dir, 'named.pid')}";`,
      `  session-keyfile "${path.join(o.dir, 'session.key')}";`,
      `  listen-on port ${o.port} { 127.0.0.1; };`,
      '  listen-on-v6 { none; };',
      '  recursion no;',
      '  dnssec-validation no;',
      '  notify no;',
      '};',
      // No rndc channel: parallel servers would fight over port 953.
      'controls { };',
      ...o.zones.map((z) =>
        [
          `zone "${z.name}" {`,
          '  type primary;',
          `  file "${z.file}";`,
          `  allow-transfer { key ${o.keyName}; };`,
          `  update-policy { grant ${o.keyName} zonesub ANY; };`,
          '};',
        ].join('\n'),
      ),
    ].join('\n') + '\n'
  );
}

/** True once named answers a TCP SOA query for `zone` with NOERROR and AA. */
export function soaAnswers(port: number, zone: string, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    let buf = Buffer.alloc(0);
    const done = (v: boolean) => {
      sock.destroy();
      resolve(v);
    };
    sock.setTimeout(1000, () => done(false));
    sock.on('error', () => done(false));
    sock.on('connect', () => sock.write(dnsPacket.streamEncode({ type: 'query', id: 7, questions: [{ type: 'SOA', name: zone }] })));
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const msg = dnsPacket.decode(buf.subarray(2));
        // RCODE is the low 4 bits of the flags (dns-packet's typings omit its decoded `rcode`).
        done(((msg.flags ?? 0) & 0xf) === 0 && msg.flag_aa && (msg.answers ?? []).some((a) => a.type === 'SOA'));
      }
    });
  });
}

/**
 * Stops a named that an earlier run left running with `dir`'s named.conf (its pid file names it;
 * the command line must name that config and its starter must be gone), so a new one can bind
 * the port. Returns its PID when it stopped one.
 */
export async function stopStaleNamed(dir: string): Promise<number | null> {
  const confFile = path.join(dir, 'named.conf');
  const pid = Number((await readFile(path.join(dir, 'named.pid'), 'utf8').catch(() => '')).trim());
  const p = procInfo(pid);
  if (!isRunning(p) || programName(p) !== 'named' || !p.argv.includes(confFile) || hasLiveNodeParent(p)) return null;
  await stopProcess({ name: 'named', pid, startTime: p.startTime, signal: 'SIGTERM', match: [confFile], graceMs: 10_000 });
  return pid;
}

export interface StartNamedOptions {
  /** Working directory: named.conf, the pid file and journals go here; zone and key files may too. */
  dir: string;
  keyFile: string;
  keyName: string;
  /** Zone files must exist; the first zone is the readiness probe. */
  zones: Array<{ name: string; file: string }>;
  /** Fixed port (one attempt); omitted: a free port, retried when named finds it taken. */
  port?: number;
  /** Every line named prints. */
  onLine?: (line: string) => void;
  readyTimeoutMs?: number;
}

export interface NamedProcess {
  port: number;
  child: ChildProcess;
  /** named's output lines so far. */
  lines: string[];
  exited: Promise<number | null>;
  /** SIGTERM, SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Writes named.conf into `dir` and starts `named -g` (as `-u bind` when we are root, with `dir`
 * and the files handed to that user), resolving once it answers. Throws with named's output when
 * it exits or does not answer in time.
 */
export async function startNamedProcess(o: StartNamedOptions): Promise<NamedProcess> {
  if (o.zones.length === 0) throw new Error('named needs at least one zone');
  const user = await bindUser();
  if (user) {
    // named drops to `bind` after reading its config; it must write journals and its pid file here.
    await chmod(o.dir, 0o755);
    for (const f of [o.dir, o.keyFile, ...o.zones.map((z) => z.file)]) await chown(f, user.uid, user.gid);
  }
  let lastError = '';
  for (let attempt = 0; attempt < (o.port === undefined ? 3 : 1); attempt++) {
    const port = o.port ?? (await freePort());
    const confFile = path.join(o.dir, 'named.conf');
    await writeFile(confFile, namedConf({ dir: o.dir, port, keyFile: o.keyFile, keyName: o.keyName, zones: o.zones }));
    if (user) await chown(confFile, user.uid, user.gid);

    // Its own session (detached): a Ctrl-C in the terminal reaches its owner only, which stops named in order.
    const child = spawn(bindTool('named'), ['-g', '-c', confFile, ...(user ? ['-u', 'bind'] : [])], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const lines: string[] = [];
    const onData = (buf: Buffer) => {
      for (const line of buf.toString().split('\n').filter(Boolean)) {
        lines.push(line);
        o.onLine?.(line);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    let exited = false;
    const exitedP = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => {
        exited = true;
        resolve(code);
      }),
    );
    let spawnError: Error | null = null;
    child.once('error', (err) => {
      spawnError = err;
      exited = true;
    });
    const stop = async (graceMs = 10_000) => {
      if (child.exitCode !== null || child.signalCode !== null || spawnError) return;
      const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      child.kill('SIGTERM');
      await exitedP;
      clearTimeout(killer);
    };

    const deadline = Date.now() + (o.readyTimeoutMs ?? 20_000);
    while (Date.now() < deadline && !exited) {
      await new Promise((r) => setTimeout(r, 100));
      if (lines.some((l) => /running$/.test(l)) && (await soaAnswers(port, o.zones[0]!.name))) {
        return { port, child, lines, exited: exitedP, stop };
      }
    }
    if (spawnError) throw new Error(`cannot start named (${(spawnError as Error).message}); install BIND: ${BIND_INSTALL_HINT}`);
    lastError = lines.join('\n');
    if (!exited) {
      child.kill('SIGKILL');
      await exitedP;
    }
    if (!/address in use/i.test(lastError)) break;
  }
  throw new Error(`named did not start answering:\n${lastError}`);
}

export interface SupervisorHooks {
  /** named exited unexpectedly; it will be started again after `delayMs`. */
  onExit?: (info: { code: number | null; signal: NodeJS.Signals | null; lastLines: string[]; delayMs: number }) => void;
  /** named runs and answers again. */
  onRestart?: (p: NamedProcess, attempt: number) => void;
  /** A restart failed; the next try comes after `delayMs`. */
  onRestartFailed?: (err: Error, delayMs: number) => void;
}

export interface BackoffOptions {
  /** First delay after an exit (ms). */
  initialMs?: number;
  /** Longest delay (ms); each failure in a row doubles it up to this. */
  maxMs?: number;
  /** A named that has run this long counts as healthy again: the next exit starts at initialMs. */
  resetAfterMs?: number;
}

export interface NamedSupervisor {
  current(): NamedProcess;
  /** Stops supervising (an exit from now on is not restarted) but leaves named running. */
  release(): void;
  /** Stops supervising and stops named. */
  stop(): Promise<void>;
}

/**
 * How long an exit waits before it counts as unexpected. A terminal's Ctrl-C signals the whole
 * process group, so named may exit a moment before our own SIGINT handler has called release().
 */
const EXIT_SETTLE_MS = 300;

/**
 * Keeps a named running: when it exits without `stop()` (killed, crashed), it is started again by
 * `restart` after a delay that doubles with each exit or failed start in a row (initialMs, 2×, 4×…
 * up to maxMs) and falls back to initialMs once named has stayed up for resetAfterMs.
 */
export function superviseNamed(
  first: NamedProcess,
  restart: () => Promise<NamedProcess>,
  hooks: SupervisorHooks = {},
  o: BackoffOptions = {},
): NamedSupervisor {
  const initialMs = o.initialMs ?? 1000;
  const maxMs = o.maxMs ?? 30_000;
  const resetAfterMs = o.resetAfterMs ?? 60_000;
  let proc = first;
  let startedAt = Date.now();
  let delay = initialMs;
  let stopping = false;
  let timer: NodeJS.Timeout | null = null;
  let attempt = 0;

  const schedule = (ms: number) => {
    timer = setTimeout(() => {
      timer = null;
      void tryRestart();
    }, ms);
    timer.unref();
    delay = Math.min(maxMs, delay * 2);
  };
  const tryRestart = async () => {
    if (stopping) return;
    attempt++;
    try {
      const p = await restart();
      if (stopping) {
        await p.stop();
        return;
      }
      proc = p;
      startedAt = Date.now();
      watch(p);
      hooks.onRestart?.(p, attempt);
    } catch (err) {
      if (stopping) return;
      hooks.onRestartFailed?.(err as Error, delay);
      schedule(delay);
    }
  };
  const watch = (p: NamedProcess) => {
    void p.exited.then((code) => {
      setTimeout(() => {
        if (stopping || p !== proc) return;
        if (Date.now() - startedAt >= resetAfterMs) delay = initialMs;
        hooks.onExit?.({ code, signal: p.child.signalCode, lastLines: p.lines.slice(-5), delayMs: delay });
        schedule(delay);
      }, EXIT_SETTLE_MS).unref();
    });
  };
  watch(first);
  return {
    current: () => proc,
    release() {
      stopping = true;
      if (timer) clearTimeout(timer);
    },
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      await proc.stop();
    },
  };
}
