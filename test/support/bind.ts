import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import dnsPacket from 'dns-packet';
import { Proc, freePort } from './processes.js';

/**
 * A real BIND `named` for tests: a temp directory with a fresh TSIG key, named.conf and zone
 * files, named in the foreground as a child process on a free high port of 127.0.0.1, plus `dig`
 * and `nsupdate` helpers for checks that do not go through the code under test.
 */

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

export interface NamedServer {
  host: '127.0.0.1';
  port: number;
  key: { name: string; secret: string; algorithm: 'hmac-sha256' };
  /** The key clause as tsig-keygen wrote it (dig/nsupdate `-k`). */
  keyFile: string;
  dir: string;
  zoneFile(zone: string): string;
  /** `dig @127.0.0.1 -p <port> -k <keyFile> ...args`; returns stdout. */
  dig(args: string[], opts?: { signed?: boolean }): Promise<string>;
  /** Runs nsupdate signed with the key; `commands` without server/send. Returns stdout. */
  nsupdate(commands: string[]): Promise<string>;
  /** named's log lines so far. */
  logs(): string[];
  stop(): Promise<void>;
}

function run(cmd: string, args: string[], input?: string, timeout = 30_000): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) {
        const code = (err as NodeJS.ErrnoException).code;
        const hint = code === 'ENOENT' ? ` (${cmd} is not installed: apt-get install bind9 bind9-dnsutils, or run bash .ci/run)` : '';
        reject(new Error(`${cmd} ${args.join(' ')} failed${hint}: ${err.message}\n${stdout}\n${stderr}`));
      } else resolve({ stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** A BIND tool from PATH, else from the sbin directories a non-root PATH often lacks (named, tsig-keygen). */
function tool(name: string): string {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), '/usr/sbin', '/usr/local/sbin', '/sbin'];
  for (const d of dirs) {
    const p = path.join(d, name);
    if (existsSync(p)) return p;
  }
  return name; // let the spawn fail with ENOENT and the install hint
}

/** uid/gid of the `bind` user when we are root (named drops privileges to it); null otherwise. */
async function bindUser(): Promise<{ uid: number; gid: number } | null> {
  if (process.getuid?.() !== 0) return null;
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  const line = passwd.split('\n').find((l) => l.startsWith('bind:'));
  if (!line) return null;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

function zoneText(zone: ZoneSpec): string {
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

/** True once named answers a TCP SOA query for `zone` with NOERROR (checked without the code under test). */
function soaAnswers(port: number, zone: string): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: '127.0.0.1', port });
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

export async function startNamed(opts: { zones: ZoneSpec[]; keyName?: string }): Promise<NamedServer> {
  if (opts.zones.length === 0) throw new Error('startNamed needs at least one zone');
  const keyName = opts.keyName ?? 'sonar-test-key';
  const dir = await mkdtemp(path.join(tmpdir(), 'sonar-named-'));
  const keyText = (await run(tool('tsig-keygen'), ['-a', 'hmac-sha256', keyName])).stdout;
  const secret = /secret\s+"([^"]+)"/.exec(keyText)?.[1];
  if (!secret) throw new Error(`could not read the secret from tsig-keygen output:\n${keyText}`);
  const keyFile = path.join(dir, 'tsig.key');
  await writeFile(keyFile, keyText);

  const zoneFile = (zone: string) => path.join(dir, `db.${zone.replace(/\.$/, '')}`);
  for (const z of opts.zones) await writeFile(zoneFile(z.name), zoneText(z));

  const user = await bindUser();
  if (user) {
    // named drops to `bind` after reading its config; it must write journals and its pid file here.
    await chmod(dir, 0o755);
    for (const f of [dir, keyFile, ...opts.zones.map((z) => zoneFile(z.name))]) await chown(f, user.uid, user.gid);
  }

  let lastError = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const conf = [
      `include "${keyFile}";`,
      'options {',
      `  directory "${dir}";`,
      `  pid-file "${path.join(dir, 'named.pid')}";`,
      `  session-keyfile "${path.join(dir, 'session.key')}";`,
      `  listen-on port ${port} { 127.0.0.1; };`,
      '  listen-on-v6 { none; };',
      '  recursion no;',
      '  dnssec-validation no;',
      '  notify no;',
      '};',
      // No rndc channel: parallel test servers would fight over port 953.
      'controls { };',
      ...opts.zones.map((z) =>
        [
          `zone "${z.name}" {`,
          '  type primary;',
          `  file "${zoneFile(z.name)}";`,
          `  allow-transfer { key ${keyName}; };`,
          `  update-policy { grant ${keyName} zonesub ANY; };`,
          '};',
        ].join('\n'),
      ),
    ].join('\n');
    const confFile = path.join(dir, 'named.conf');
    await writeFile(confFile, `${conf}\n`);
    if (user) await chown(confFile, user.uid, user.gid);

    const args = ['-g', '-c', confFile, ...(user ? ['-u', 'bind'] : [])];
    const proc = new Proc(spawn(tool('named'), args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    const spawnError = new Promise<Error>((resolve) => proc.child.once('error', resolve));
    const deadline = Date.now() + 20_000;
    let ready = false;
    let exited = false;
    void proc.exited.then(() => (exited = true));
    while (Date.now() < deadline && !exited) {
      const err = await Promise.race([spawnError, new Promise<null>((r) => setTimeout(() => r(null), 100))]);
      if (err) throw new Error(`cannot start named (${err.message}); install bind9 (bash .ci/run does)`);
      if (proc.lines.some((l) => /running$/.test(l)) && (await soaAnswers(port, opts.zones[0]!.name))) {
        ready = true;
        break;
      }
    }
    if (ready) {
      const server: NamedServer = {
        host: '127.0.0.1',
        port,
        key: { name: keyName, secret, algorithm: 'hmac-sha256' },
        keyFile,
        dir,
        zoneFile,
        async dig(digArgs, o = {}) {
          const base = ['@127.0.0.1', '-p', String(port), ...(o.signed === false ? [] : ['-k', keyFile])];
          return (await run(tool('dig'), [...base, ...digArgs])).stdout;
        },
        async nsupdate(commands) {
          const script = [`server 127.0.0.1 ${port}`, ...commands, 'send', ''].join('\n');
          return (await run(tool('nsupdate'), ['-k', keyFile], script)).stdout;
        },
        logs: () => [...proc.lines],
        async stop() {
          const killer = setTimeout(() => proc.child.kill('SIGKILL'), 10_000);
          await proc.stop('SIGTERM');
          clearTimeout(killer);
          await rm(dir, { recursive: true, force: true });
        },
      };
      return server;
    }
    lastError = proc.lines.join('\n');
    await proc.stop('SIGKILL');
    if (!/address in use/i.test(lastError)) break;
  }
  await rm(dir, { recursive: true, force: true });
  throw new Error(`named did not start answering:\n${lastError}`);
}
