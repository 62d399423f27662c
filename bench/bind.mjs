// A throwaway BIND `named` for bench/dns.mjs: a fresh TSIG key (tsig-keygen), named.conf and one
// primary zone in a temp directory, named in the foreground on a free port of 127.0.0.1, plus
// timed `dig` / `nsupdate` runners. A minimal copy of what test/support/bind.ts does (the bench does
// not import test code).
import { execFile, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, openSync, closeSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { sleep } from './lib.mjs';

/** A BIND tool from PATH, else from the sbin directories a non-root PATH often lacks (named, tsig-keygen). */
export function tool(name) {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), '/usr/sbin', '/usr/local/sbin', '/sbin'];
  for (const d of dirs) {
    const p = path.join(d, name);
    if (existsSync(p)) return p;
  }
  return name;
}

/** Runs a command; resolves { stdout, stderr, ms } (wall time including process start), rejects on a non-zero exit. */
export function run(cmd, args, { input, stdoutTo, timeout = 120_000 } = {}) {
  return new Promise((resolve, reject) => {
    const out = stdoutTo ? openSync(stdoutTo, 'w') : 'pipe';
    const t0 = performance.now();
    const child = spawn(cmd, args, { stdio: [input === undefined ? 'ignore' : 'pipe', out, 'pipe'] });
    if (typeof out === 'number') closeSync(out);
    const stdout = [];
    const stderr = [];
    child.stdout?.on('data', (b) => stdout.push(b));
    child.stderr.on('data', (b) => stderr.push(b));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${cmd}: ${err.message}${err.code === 'ENOENT' ? ' (install bind9 and bind9-dnsutils)' : ''}`));
    });
    child.once('close', (code, signal) => {
      const ms = performance.now() - t0;
      clearTimeout(timer);
      const res = { stdout: Buffer.concat(stdout).toString(), stderr: Buffer.concat(stderr).toString(), ms };
      if (code === 0) resolve(res);
      else reject(new Error(`${path.basename(cmd)} ${args.slice(0, 6).join(' ')} … exited ${code ?? signal}: ${res.stderr.trim()} ${res.stdout.slice(0, 500).trim()}`));
    });
    if (input !== undefined) {
      child.stdin.on('error', () => undefined); // an early exit is reported by 'close'
      child.stdin.end(input);
    }
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** uid/gid of `bind` when we are root (named drops privileges to it), else null. */
function bindUser() {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('bind:'));
  if (!line) return null;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * Starts named with one primary zone whose file is already written at `zoneFile` (inside `dir`).
 * The key allows transfers and updates of the zone. `onStop` cleanup is the caller's (stop()).
 */
export async function startNamed({ dir, zone, zoneFile, keyName = 'sonar-bench-key', signal }) {
  mkdirSync(dir, { recursive: true });
  const keyText = (await run(tool('tsig-keygen'), ['-a', 'hmac-sha256', keyName])).stdout;
  const secret = /secret\s+"([^"]+)"/.exec(keyText)?.[1];
  if (!secret) throw new Error(`could not read the secret from tsig-keygen output:\n${keyText}`);
  const keyFile = path.join(dir, 'tsig.key');
  writeFileSync(keyFile, keyText);
  chmodSync(keyFile, 0o644);
  const user = bindUser();
  if (user) {
    chmodSync(dir, 0o755);
    for (const f of [dir, keyFile, zoneFile]) chownSync(f, user.uid, user.gid);
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
      'controls { };',
      `zone "${zone}" {`,
      '  type primary;',
      `  file "${zoneFile}";`,
      `  allow-transfer { key ${keyName}; };`,
      `  update-policy { grant ${keyName} zonesub ANY; };`,
      '};',
    ].join('\n');
    const confFile = path.join(dir, 'named.conf');
    writeFileSync(confFile, `${conf}\n`);
    if (user) chownSync(confFile, user.uid, user.gid);

    const child = spawn(tool('named'), ['-g', '-c', confFile, ...(user ? ['-u', 'bind'] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
    const lines = [];
    let exited = false;
    const exit = new Promise((resolve) => child.once('close', () => resolve((exited = true))));
    const collect = (b) => {
      for (const l of b.toString().split('\n')) if (l) lines.push(l);
      if (lines.length > 500) lines.splice(0, lines.length - 500);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    let spawnError = null;
    child.once('error', (err) => (spawnError = err));
    const stop = async () => {
      if (exited) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(t);
    };
    signal?.addEventListener('abort', () => child.kill('SIGKILL'), { once: true });

    const digBase = ['@127.0.0.1', '-p', String(port)];
    const deadline = Date.now() + 60_000; // a 100k-record zone takes a moment to load
    let ready = false;
    while (Date.now() < deadline && !exited) {
      if (spawnError) throw new Error(`cannot start named (${spawnError.message}); install bind9`);
      if (lines.some((l) => /running$/.test(l))) {
        const soa = await run(tool('dig'), [...digBase, '+tcp', '+norec', '+short', '+time=1', '+tries=1', zone, 'SOA']).catch(() => null);
        if (soa && soa.stdout.trim()) {
          ready = true;
          break;
        }
      }
      await sleep(100);
    }
    if (ready) {
      return {
        port,
        keyName,
        secret,
        keyFile,
        /** `-y hmac-sha256:name:secret`, as dig takes it. */
        yArg: `hmac-sha256:${keyName}:${secret}`,
        dig: (args, opts = {}) => run(tool('dig'), [...digBase, ...args], opts),
        /** One update message: `commands` without server/send. */
        nsupdate: (commands) => run(tool('nsupdate'), ['-k', keyFile], { input: [`server 127.0.0.1 ${port}`, ...commands, 'send', ''].join('\n') }),
        logs: () => [...lines],
        stop,
      };
    }
    lastError = lines.slice(-30).join('\n');
    child.kill('SIGKILL');
    await exit;
    if (!/address in use/i.test(lastError)) break;
  }
  throw new Error(`named did not start answering:\n${lastError}`);
}

// ---- the zone --------------------------------------------------------------------------------------
const DEPTS = ['eng', 'ops', 'sales', 'hr', 'lab', 'db', 'web', 'edge', 'mail', 'dev', 'qa', 'prod', 'stage', 'corp', 'vpn', 'iot'];
export const WORDS = ['amber', 'birch', 'cobalt', 'delta', 'ember', 'falcon', 'garnet', 'harbor', 'indigo', 'juniper', 'kestrel', 'lumen'];

/** Host i's IPv4 address (unique per i up to 2^24). */
export const hostIp = (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
export const hostName = (i, zone) => `h${i}.${DEPTS[i % DEPTS.length]}.${zone}`;

/**
 * A zone file with exactly `total` records (SOA, NS and ns1 A included): hosts h<i>.<dept> each
 * with an A record, and by turns AAAA (every 2nd), TXT (every 3rd: team/owner words or SPF),
 * a www-<i> CNAME to the host (every 4th) and MX (every 5th). Returns the text and the host count.
 */
export function makeZone(zone, total) {
  const out = ['$TTL 300', `@ IN SOA ns1.${zone}. hostmaster.${zone}. 1 3600 600 86400 300`, `@ IN NS ns1.${zone}.`, `ns1 IN A 127.0.0.1`, `@ IN MX 10 mx1.${zone}.`, `mx1 IN A 127.0.0.2`];
  let count = 5;
  let hosts = 0;
  const add = (line) => {
    if (count >= total) return false;
    out.push(line);
    count++;
    return true;
  };
  for (let i = 0; count < total; i++) {
    const owner = hostName(i, zone) + '.';
    hosts = i + 1;
    add(`${owner} IN A ${hostIp(i)}`);
    if (i % 2 === 0) add(`${owner} IN AAAA fd00:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`);
    if (i % 3 === 0)
      add(
        i % 6 === 0
          ? `${owner} IN TXT "team=${DEPTS[i % DEPTS.length]}" "owner=${WORDS[Math.floor(i / 6) % WORDS.length]}"`
          : `${owner} IN TXT "v=spf1 ip4:${hostIp(i)} include:_spf.${zone} -all"`,
      );
    if (i % 4 === 0) add(`www-${i}.${zone}. 600 IN CNAME ${owner}`);
    if (i % 5 === 0) add(`${owner} IN MX ${10 + (i % 3) * 10} mx1.${zone}.`);
  }
  return { text: `${out.join('\n')}\n`, records: count, hosts };
}
