import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ZoneRegistry } from '../../coordinator/src/dns/zone-registry.js';
import { parsePresentationRecords } from '../../coordinator/src/dns/wire/index.js';
import { startNamed, type NamedServer } from '../support/bind.js';
import { createTestApp, type TestApp } from '../support/harness.js';

/**
 * Failures of the master are answered honestly, on a real named that the test kills, stops, or
 * reaches through a relay that loses answers:
 * - a master that cannot be reached is 503 service_unavailable (with Retry-After) and that means
 *   the change was not sent: it is never in BIND afterwards;
 * - a change that was sent and not answered is decided by a read-back: 200 when the master has
 *   it, otherwise 503 outcome_unknown (never "not applied": a stopped named applies it later);
 * - one request takes at most DNS_TIMEOUT_MS of master time.
 */
const H = 'honest.test';
const L = 'lossy.test';
const TIMEOUT_MS = 1500;

let ns: NamedServer;
let t: TestApp;
let key: string;
let relay: { port: number; mode: 'pass' | 'drop-answer' | 'swallow'; close: () => Promise<void> };

beforeAll(async () => {
  ns = await startNamed({
    zones: [
      { name: H, records: [{ name: `www.${H}`, type: 'A', rdata: '10.8.0.1' }] },
      { name: L, records: [{ name: `www.${L}`, type: 'A', rdata: '10.8.1.1' }] },
    ],
  });
  relay = await updateRelay(ns.port);
  t = await createTestApp({ env: { DNS_TIMEOUT_MS: String(TIMEOUT_MS) } });
  const zones = new ZoneRegistry(t.orm);
  await zones.upsert({ zone: H, file: ns.zoneFile(H), keyFile: ns.keyFile, server: '127.0.0.1', port: ns.port });
  await zones.upsert({ zone: L, file: ns.zoneFile(L), keyFile: ns.keyFile, server: '127.0.0.1', port: relay.port });
  key = (await t.accounts.createDnsApiKey({ name: 'honest' })).key;
}, 60_000);

afterAll(async () => {
  await t?.close();
  await relay?.close();
  await ns?.stop();
});

const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, payload, headers: { 'x-api-key': key } });

async function digRdata(name: string, type: string): Promise<string[]> {
  const out = await ns.dig(['+noall', '+answer', name, type]);
  return parsePresentationRecords(out)
    .filter((r) => r.type === type && r.name === name)
    .map((r) => r.rdata)
    .sort();
}

/**
 * A TCP relay in front of named that leaves queries alone and, for UPDATE messages (opcode 5),
 * either passes them (`pass`), forwards them but cuts the connection instead of relaying the answer
 * (`drop-answer`: the change is made, the client never hears of it), or cuts the connection without
 * forwarding (`swallow`: the change is never made).
 */
async function updateRelay(target: number) {
  const sockets = new Set<Socket>();
  const state = { mode: 'pass' as 'pass' | 'drop-answer' | 'swallow' };
  const server: Server = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port: target });
    sockets.add(client).add(upstream);
    const mode = state.mode;
    let buffered = Buffer.alloc(0);
    let sawUpdate = false;
    client.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const frame = buffered.subarray(0, 2 + buffered.readUInt16BE(0));
        buffered = buffered.subarray(frame.length);
        const opcode = (frame.readUInt16BE(4) >> 11) & 0xf;
        if (opcode === 5) {
          sawUpdate = true;
          if (mode === 'swallow') {
            client.destroy();
            upstream.destroy();
            return;
          }
        }
        upstream.write(frame);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (sawUpdate && mode === 'drop-answer') {
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    for (const s of [client, upstream]) {
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    get mode() {
      return state.mode;
    },
    set mode(m) {
      state.mode = m;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('an UPDATE whose answer is lost', () => {
  it('applied on the master: 200, saying the read-back found it', async () => {
    relay.mode = 'drop-answer';
    const res = await post('/api/dns/records/add', { domain: `lost.${L}`, type: 'TXT', target: '"made it"' });
    relay.mode = 'pass';
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, verified: true });
    expect(res.json().message).toMatch(/did not answer.*read-back shows the change/);
    expect(await digRdata(`lost.${L}`, 'TXT')).toEqual(['"made it"']);
  });

  it('not on the master: 503 outcome_unknown, never "not applied"', async () => {
    relay.mode = 'swallow';
    const res = await post('/api/dns/records/add', { domain: `gone.${L}`, type: 'TXT', target: '"never sent on"' });
    relay.mode = 'pass';
    expect(res.statusCode, res.body).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expect(res.json()).toMatchObject({ ok: false, reason: 'outcome_unknown' });
    expect(res.json().message).toMatch(/^Outcome unknown: .*does not show the change, but the master may still apply/);
    expect(res.json().message).not.toMatch(/did not apply/);
    expect(await digRdata(`gone.${L}`, 'TXT')).toEqual([]);
  });

  it('a bulk whose answer is lost is decided as a whole by the read-back', async () => {
    relay.mode = 'drop-answer';
    const res = await post('/api/dns/records/bulk', {
      operations: [
        { action: 'ADD', domain: `b1.${L}`, type: 'A', target: '10.8.1.10' },
        { action: 'DELETE', domain: `www.${L}`, type: 'A', target: '10.8.1.1' },
      ],
    });
    relay.mode = 'pass';
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, update_messages: 1 });
    expect(await digRdata(`b1.${L}`, 'A')).toEqual(['10.8.1.10']);
    expect(await digRdata(`www.${L}`, 'A')).toEqual([]);
  });
});

describe('a stopped master (SIGSTOP)', () => {
  it('a write whose pre-check is not answered: 503 service_unavailable within DNS_TIMEOUT_MS, nothing sent', async () => {
    await ns.signal('SIGSTOP');
    const started = Date.now();
    let res;
    try {
      res = await post('/api/dns/records/add', { domain: `paused.${H}`, type: 'TXT', target: '"while stopped"' });
    } finally {
      await ns.signal('SIGCONT');
    }
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 500);
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toMatchObject({ ok: false, reason: 'service_unavailable' });
    expect(res.json().message).toMatch(/could not be asked before the change, so nothing was sent: .*no answer within/);
    expect(await digRdata(`paused.${H}`, 'TXT')).toEqual([]);
  });

  it('an UPDATE sent just before the stop: outcome_unknown, and the change shows up after SIGCONT', async () => {
    // The relay holds the UPDATE frame until named is stopped, so the pre-checks are answered and the UPDATE is what waits.
    const stopped = { done: false };
    const held = await holdingRelay(ns.port, async () => {
      await ns.signal('SIGSTOP');
      stopped.done = true;
    });
    const zones = new ZoneRegistry(t.orm);
    await zones.upsert({ zone: L, file: ns.zoneFile(L), keyFile: ns.keyFile, server: '127.0.0.1', port: held.port });
    const started = Date.now();
    let res;
    try {
      res = await post('/api/dns/records/add', { domain: `late.${L}`, type: 'TXT', target: '"applied later"' });
    } finally {
      if (stopped.done) await ns.signal('SIGCONT');
      await zones.upsert({ zone: L, file: ns.zoneFile(L), keyFile: ns.keyFile, server: '127.0.0.1', port: relay.port });
      await held.close();
    }
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 500);
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toMatchObject({ ok: false, reason: 'outcome_unknown' });
    // The reason it was unknown: named had it all along.
    await vi.waitFor(async () => expect(await digRdata(`late.${L}`, 'TXT')).toEqual(['"applied later"']), { timeout: 5000, interval: 100 });
  });
});

/** A relay that, on the first UPDATE frame, runs `beforeForward` (stops named) and then forwards it. */
async function holdingRelay(target: number, beforeForward: () => Promise<void>) {
  const sockets = new Set<Socket>();
  let fired = false;
  const server = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port: target });
    sockets.add(client).add(upstream);
    let buffered = Buffer.alloc(0);
    let chain = Promise.resolve();
    client.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const frame = buffered.subarray(0, 2 + buffered.readUInt16BE(0));
        buffered = buffered.subarray(frame.length);
        const isUpdate = ((frame.readUInt16BE(4) >> 11) & 0xf) === 5;
        chain = chain.then(async () => {
          if (isUpdate && !fired) {
            fired = true;
            await beforeForward();
          }
          upstream.write(frame);
        });
      }
    });
    upstream.pipe(client);
    for (const s of [client, upstream]) {
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('named killed (SIGKILL) during a burst of writes', () => {
  it('every answer is 200 (in BIND), 503 service_unavailable (not in BIND) or 503 outcome_unknown; none is a 500', async () => {
    const answers: Array<{ name: string; status: number; reason?: string; message?: string }> = [];
    const kill: { done: Promise<void> | null } = { done: null };
    let afterKill = 0;
    const worker = async (w: number) => {
      for (let i = 0; afterKill < 40; i++) {
        const name = `burst-${w}-${i}.${H}`;
        const res = await post('/api/dns/records/add', { domain: name, type: 'TXT', target: `"w${w} i${i}"` });
        const body = res.json();
        answers.push({ name, status: res.statusCode, reason: body.reason, message: body.message });
        if (kill.done) afterKill++;
        // Kill once ten writes have been acknowledged, while the other workers are mid-request.
        else if (answers.filter((a) => a.status === 200).length >= 10) kill.done = ns.signal('SIGKILL');
      }
    };
    await Promise.all([0, 1, 2, 3].map(worker));
    await kill.done;

    // Every route, with the master gone: 503 service_unavailable with Retry-After, saying what happened.
    const sweep = [
      await post('/api/dns/records/add', { domain: `new.${H}`, type: 'A', target: '10.8.0.9' }),
      await post('/api/dns/records/add', { domain: `cn.${H}`, type: 'CNAME', target: `www.${H}.` }),
      await post('/api/dns/records/delete', { domain: `www.${H}`, type: 'A', target: '10.8.0.1' }),
      await post('/api/dns/records/update', { domain: `www.${H}`, type: 'A', old_target: '10.8.0.1', new_target: '10.8.0.2' }),
      await post('/api/dns/records/bulk', { operations: [{ action: 'ADD', domain: `b.${H}`, type: 'A', target: '10.8.0.3' }] }),
      await post('/api/dns/acme/present', { domain: H, challenge: 'c1' }),
      await post('/api/dns/acme/cleanup', { domain: H, challenge: 'c1' }),
      await post('/api/dns/acme/cleanup-stale', { domain: H }),
    ];
    for (const res of sweep) {
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json()).toMatchObject({ ok: false, reason: 'service_unavailable' });
      expect(res.json().message).toMatch(/master DNS server could not be (reached|asked).*ECONNREFUSED/);
      expect(res.headers['retry-after']).toBe('5');
    }

    await ns.restart();
    expect(
      answers.every((a) => a.status === 200 || a.status === 503),
      JSON.stringify(answers.filter((a) => a.status !== 200 && a.status !== 503)),
    ).toBe(true);
    const failed = answers.filter((a) => a.status === 503);
    expect(failed.length).toBeGreaterThan(0);
    for (const a of answers) {
      const inBind = (await digRdata(a.name, 'TXT')).length === 1;
      if (a.status === 200) expect(inBind, `${a.name} acknowledged`).toBe(true);
      else if (a.reason === 'service_unavailable') {
        expect(inBind, `${a.name}: ${a.message}`).toBe(false);
        expect(a.message).toMatch(/master DNS server/);
      } else expect(a.reason).toBe('outcome_unknown');
    }
  }, 60_000);
});
