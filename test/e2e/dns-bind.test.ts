import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DnsMasterClient,
  DnsRcodeError,
  TsigError,
  UpdateNotAppliedError,
  axfr,
  noCname,
  parseMessage,
  parsePresentationRecords,
  parseRdata,
  decodeRdata,
  rdataText,
  renderRdata,
  query,
  readZoneFile,
  soaSerial,
  txtValue,
  typeName,
  classNameOf,
  type DnsRecord,
  type ServerOptions,
} from '../../coordinator/src/dns/wire/index.js';
import { CacheRowWriter } from '../../coordinator/src/dns/cache-rows.js';
import { scanAnswers } from '../../coordinator/src/dns/wire/message.js';
import { startNamed, type NamedServer, type ZoneRecordSpec } from '../support/bind.js';

/**
 * The client layer against a real BIND named: zone transfer with TSIG on every message, signed
 * UPDATEs checked with an independent `dig`, prerequisite and CNAME-conflict behaviour, zone
 * file reads. dig and nsupdate (not the code under test) provide the independent view.
 */

const BIG = 'big.test';
const EDIT = 'edit.test';
const BIG_COUNT = 5000;

/** ~5000 records of every modelled type, enough for a transfer of several messages. */
function bigZoneRecords(): ZoneRecordSpec[] {
  const out: ZoneRecordSpec[] = [];
  for (let i = 0; out.length < BIG_COUNT; i++) {
    const h = `host${i}.${BIG}`;
    switch (i % 8) {
      case 0:
        out.push({ name: h, type: 'A', rdata: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` });
        break;
      case 1:
        out.push({ name: h, type: 'AAAA', rdata: `2001:db8::${i.toString(16)}` });
        break;
      case 2:
        out.push({ name: h, type: 'TXT', rdata: `"v=test ${i}" "quote\\" and \\\\ backslash" "${'t'.repeat(200 + (i % 50))}"`, ttl: 60 });
        break;
      case 3:
        out.push({ name: h, type: 'MX', rdata: `${i % 100} mail${i}.${BIG}.` });
        break;
      case 4:
        out.push({ name: `_svc${i}._tcp.${BIG}`, type: 'SRV', rdata: `1 ${i % 65535} ${1024 + (i % 60000)} target${i}.${BIG}.` });
        break;
      case 5:
        out.push({ name: h, type: 'CAA', rdata: `0 issue "ca${i}.example"` });
        break;
      case 6:
        out.push({ name: `alias${i}.${BIG}`, type: 'CNAME', rdata: `host${i - 6}.${BIG}.` });
        break;
      case 7:
        out.push({ name: `Mixed${i}.${BIG}`, type: 'PTR', rdata: `Target${i}.Example.NET.`, ttl: 7200 });
        break;
    }
  }
  return out;
}

const sortRecords = (rs: DnsRecord[]) => rs.map((r) => `${r.name} ${r.ttl} ${r.class} ${r.type} ${r.rdata}`).sort();

/** dig's view: records of the answer sections, TSIG lines dropped. */
function digRecords(text: string): DnsRecord[] {
  return parsePresentationRecords(text).filter((r) => r.type !== 'TSIG');
}

/** A TCP relay to named that can alter the Nth server message (to prove each one is verified). */
async function tamperingProxy(target: number, alter: (frameIndex: number, frame: Buffer) => Buffer): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port: target });
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    let buf = Buffer.alloc(0);
    let index = 0;
    upstream.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const len = buf.readUInt16BE(0);
        const frame = alter(index++, Buffer.from(buf.subarray(2, 2 + len)));
        const head = Buffer.alloc(2);
        head.writeUInt16BE(frame.length);
        client.write(Buffer.concat([head, frame]));
        buf = buf.subarray(2 + len);
      }
    });
    const end = () => (client.destroy(), upstream.destroy());
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

let named: NamedServer;
let opts: ServerOptions;
let client: DnsMasterClient;
const bigRecords = bigZoneRecords();

beforeAll(async () => {
  named = await startNamed({
    zones: [
      { name: BIG, records: bigRecords, serial: 2024010101 },
      {
        name: EDIT,
        serial: 100,
        records: [
          { name: `www.${EDIT}`, type: 'A', rdata: '192.0.2.10' },
          { name: `cn.${EDIT}`, type: 'CNAME', rdata: `www.${EDIT}.` },
          { name: `multi.${EDIT}`, type: 'A', rdata: '192.0.2.20' },
          { name: `multi.${EDIT}`, type: 'A', rdata: '192.0.2.21' },
          { name: `old.${EDIT}`, type: 'TXT', rdata: '"one"' },
          { name: `old.${EDIT}`, type: 'TXT', rdata: '"two"' },
        ],
      },
    ],
  });
  opts = { server: named.host, port: named.port, key: named.key };
  client = new DnsMasterClient(opts);
}, 60_000);

afterAll(async () => {
  await named?.stop();
});

/** `dig +short` against the master, unsigned query (plain queries need no key). */
async function digShort(name: string, type: string): Promise<string[]> {
  const out = await named.dig(['+short', '+norecurse', name, type], { signed: false });
  return out.split('\n').filter(Boolean).sort();
}

describe('AXFR', () => {
  it('transfers a ~5000 record zone over several messages, each TSIG-verified, equal to dig AXFR', async () => {
    const perMessage: number[] = [];
    const streamed: DnsRecord[] = [];
    const started = Date.now();
    const res = await client.axfr(BIG, (batch) => {
      perMessage.push(batch.length);
      streamed.push(...batch);
    });
    const elapsed = Date.now() - started;

    expect(res.serial).toBe(2024010101);
    expect(res.records).toEqual([]); // streamed, not held
    expect(res.count).toBe(BIG_COUNT + 3); // + SOA, NS, ns1 A
    expect(streamed).toHaveLength(res.count);
    expect(streamed[0]!.type).toBe('SOA');
    expect(streamed.filter((r) => r.type === 'SOA')).toHaveLength(1);
    expect(res.messages).toBeGreaterThan(2);
    expect(res.signedMessages).toBe(res.messages); // BIND signs every message; each one verified
    expect(perMessage).toHaveLength(res.messages);
    expect(perMessage.reduce((a, b) => a + b, 0)).toBe(res.count);

    const dug = digRecords(await named.dig(['AXFR', BIG, '+nocmd', '+nostats', '+nocomments']));
    // dig prints the closing SOA; drop it.
    expect(dug.at(-1)!.type).toBe('SOA');
    expect(sortRecords(streamed)).toEqual(sortRecords(dug.slice(0, -1)));

    // Spot checks against the generator, independent of both renderers.
    const find = (name: string, type: string) => streamed.filter((r) => r.name === name && r.type === type);
    expect(find(`host2.${BIG}`, 'TXT')).toEqual([
      { name: `host2.${BIG}`, ttl: 60, class: 'IN', type: 'TXT', rdata: `"v=test 2" "quote\\" and \\\\ backslash" "${'t'.repeat(202)}"` },
    ]);
    expect(find(`mixed7.${BIG}`, 'PTR')[0]).toMatchObject({ ttl: 7200, rdata: 'target7.example.net' });
    expect(find(`_svc4._tcp.${BIG}`, 'SRV')[0]!.rdata).toBe(`1 4 1028 target4.${BIG}`);
    expect(find(`host1.${BIG}`, 'AAAA')[0]!.rdata).toBe('2001:db8::1');
    expect(elapsed).toBeLessThan(20_000);
  });

  it('writes the same cache rows from a transfer’s bytes as from its records (COPY text, zone-cache’s two paths)', async () => {
    // One writer fed the transfer's RecordTables (the refresh path), the other the same records
    // parsed and rendered by the decoded path (parseMessage + decodeRdata + renderRdata).
    const fromWire = new CacheRowWriter(7);
    const fromRecords = new CacheRowWriter(7);
    const res = await client.axfrWire(BIG, (msg, fields, count) => {
      for (let i = 0; i < count; i++) fromWire.wire(msg, fields, i);
      for (const rr of parseMessage(msg).answers.slice(0, count))
        fromRecords.record({
          name: rr.name,
          ttl: rr.ttl,
          class: 'IN',
          type: typeName(rr.type),
          rdata: renderRdata(decodeRdata(rr.type, msg, rr.rdataOffset, rr.rdataLength)),
        });
    });
    expect(res.count).toBe(BIG_COUNT + 3);
    expect(fromWire.rows).toBe(res.count);
    const text = fromWire.take().toString('utf8');
    expect(text).toBe(fromRecords.take().toString('utf8'));
    const lines = text.split('\n').slice(0, -1);
    expect(lines).toHaveLength(res.count);
    // Spot checks of the COPY text itself: ids -1, -2, … in transfer order, the sort key, the
    // rank, and record data whose backslashes COPY needs doubled.
    const row = (name: string, type: string) => {
      const i = lines.findIndex((l) => l.split('\t')[4] === name && l.split('\t')[5] === type);
      return { i, cols: lines[i]!.split('\t') };
    };
    expect(lines[0]!.split('\t').slice(0, 6)).toEqual(['-1', '7', 'test.big', '0', BIG, 'SOA']);
    const ptr = row(`mixed7.${BIG}`, 'PTR');
    expect(ptr.cols).toEqual([`-${ptr.i + 1}`, '7', 'test.big.mixed7', '2', `mixed7.${BIG}`, 'PTR', 'IN', '7200', 'target7.example.net']);
    expect(row(`host2.${BIG}`, 'TXT').cols[8]).toBe(String.raw`"v=test 2" "quote\\" and \\\\ backslash" "` + 't'.repeat(202) + '"');
  });

  it('fails with the server’s BADSIG for a wrong secret and BADKEY for an unknown key name', async () => {
    const wrongSecret = axfr(BIG, { ...opts, key: { name: named.key.name, secret: Buffer.alloc(32, 9).toString('base64') } });
    await expect(wrongSecret).rejects.toBeInstanceOf(TsigError);
    await expect(wrongSecret).rejects.toMatchObject({ code: 'BADSIG', source: 'server', tsigErrorNumber: 16 });

    const unknownKey = axfr(BIG, { ...opts, key: { name: 'not-a-key', secret: named.key.secret } });
    await expect(unknownKey).rejects.toMatchObject({ name: 'TsigError', code: 'BADKEY', source: 'server', tsigErrorNumber: 17 });

    // Without a key the transfer is simply refused (allow-transfer is key-only).
    await expect(axfr(BIG, { server: named.host, port: named.port })).rejects.toMatchObject({ name: 'DnsRcodeError', code: 'REFUSED' });
  });

  it('maps the server’s BADTIME when our clock is off by more than the fudge', async () => {
    const skewed = soaSerial(BIG, { ...opts, now: () => Math.floor(Date.now() / 1000) - 3600 });
    await expect(skewed).rejects.toMatchObject({ name: 'TsigError', code: 'BADTIME', source: 'server', tsigErrorNumber: 18 });
  });

  it('rejects a transfer whose later message was altered in flight (every message is verified)', async () => {
    // Change the TTL of the first record of the 3rd message: still a well-formed message, so only its MAC can tell.
    const proxy = await tamperingProxy(named.port, (i, frame) => {
      if (i !== 2) return frame;
      const copy = Buffer.from(frame);
      const first = parseMessage(copy).answers[0]!;
      copy.writeUInt32BE(first.ttl + 1, first.rdataOffset - 6);
      return copy;
    });
    try {
      await expect(axfr(BIG, { ...opts, port: proxy.port })).rejects.toMatchObject({ name: 'TsigError', code: 'BADSIG', source: 'local' });
      // An untouched relay transfers fine, so the failure above is the tampering.
      const clean = await tamperingProxy(named.port, (_i, f) => f);
      try {
        expect((await axfr(BIG, { ...opts, port: clean.port })).records).toHaveLength(BIG_COUNT + 3);
      } finally {
        await clean.close();
      }
    } finally {
      await proxy.close();
    }
  });

  it('rejects a transfer whose signatures were stripped from the last or a middle message', async () => {
    let total = 0;
    const count = await tamperingProxy(named.port, (_i, f) => (total++, f));
    await axfr(BIG, { ...opts, port: count.port });
    await count.close();
    const stripAt = (which: number) =>
      tamperingProxy(named.port, (i, frame) => {
        if (i !== which) return frame;
        // Drop the trailing TSIG RR: cut it off and decrement ARCOUNT.
        const tsig = parseMessage(frame).additionals.at(-1)!;
        if (tsig.type !== 250) throw new Error('expected a TSIG RR last');
        const copy = Buffer.from(frame.subarray(0, tsig.start));
        copy.writeUInt16BE(frame.readUInt16BE(10) - 1, 10);
        return copy;
      });
    // Last message unsigned: the stream must end signed.
    const last = await stripAt(total - 1);
    try {
      await expect(axfr(BIG, { ...opts, port: last.port })).rejects.toMatchObject({ name: 'TsigError', code: 'UNSIGNED' });
    } finally {
      await last.close();
    }
    // A middle message unsigned is allowed by the RFC, but the next MAC then no longer chains.
    const middle = await stripAt(3);
    try {
      await expect(axfr(BIG, { ...opts, port: middle.port })).rejects.toMatchObject({ name: 'TsigError', code: 'BADSIG' });
    } finally {
      await middle.close();
    }
  });
});

describe('RDATA rendering', () => {
  it('the direct path (rdataText) says what the decoded path says, edge cases included, and raises the same errors', () => {
    const cases: Array<[number, number[]]> = [
      [1, [192, 0, 2, 1]],
      [28, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4]], // IPv4-mapped
      [28, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]],
      [28, [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]],
      [16, [0]], // one empty string
      [16, []], // no strings
      [16, [3, 0x61, 0x22, 0x5c, 2, 0x00, 0xff, 5, 0x68, 0x65, 0x6c, 0x6c, 0x6f]], // quote, backslash, non-printables
      [15, [0, 10, 2, 0x6d, 0x78, 0]], // MX 10 mx.
      [5, [3, 0x77, 0x77, 0x77, 0]], // CNAME www.
    ];
    for (const [type, bytes] of cases) {
      const msg = Buffer.from([9, 9, ...bytes]); // not at offset 0, as inside a message
      expect(rdataText(type, msg, 2, bytes.length), `${type} ${bytes.join(',')}`).toBe(renderRdata(decodeRdata(type, msg, 2, bytes.length)));
    }
    for (const [type, bytes] of [
      [1, [1, 2, 3]],
      [16, [5, 0x61]],
      [5, [3, 0x77, 0x77, 0x77, 0, 7]],
    ] as Array<[number, number[]]>) {
      const msg = Buffer.from(bytes);
      expect(() => rdataText(type, msg, 0, bytes.length)).toThrow(/RDATA|RDLENGTH|runs past|length/);
    }
  });
});

describe('cache rows (COPY text)', () => {
  /** A name's wire bytes: labels (text as latin1, or raw bytes), then the root or a compression pointer. */
  const name = (labels: Array<string | number[]>, pointer?: number) => [
    ...labels.flatMap((l) => {
      const b = typeof l === 'string' ? [...Buffer.from(l, 'latin1')] : l;
      return [b.length, ...b];
    }),
    ...(pointer === undefined ? [0] : [0xc0 | (pointer >> 8), pointer & 0xff]),
  ];

  it('writes names that need escapes, odd bytes in data and unknown types the same from the bytes as from the records', () => {
    // Owner of the first record at offset 12; "Example.TEST" at 17 (after the 5 bytes of "Host").
    const records: Array<{ owner: number[]; type: number; klass?: number; rdata: number[] }> = [
      { owner: name(['Host', 'Example', 'TEST']), type: 1, rdata: [192, 0, 2, 1] },
      { owner: name(['a b'], 17), type: 16, rdata: [3, 0x78, 0x09, 0x79, 4, 0x0a, 0x0d, 0x5c, 0x22] },
      { owner: name(['dot.inside'], 17), type: 5, rdata: name([], 12) },
      { owner: name(['back\\slash'], 17), type: 15, rdata: [0, 10, ...name(['MAIL'], 17)] },
      { owner: name([[0xc3, 0xa9]], 17), type: 12, rdata: name(['x y'], 17) },
      { owner: [0], type: 2, rdata: name(['ns1'], 17) },
      { owner: name([], 12), type: 65280, rdata: [1, 2, 3] },
      { owner: name([], 12), type: 28, klass: 3, rdata: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1] },
      { owner: name(['_srv', '_tcp'], 17), type: 33, rdata: [0, 1, 0, 2, 0, 80, ...name(['t'], 17)] },
      // Addresses written from their groups: every zero-run rule of RFC 5952.
      ...[
        [0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 1],
        [1, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0xffff, 0xc000, 0x0201],
        [0, 0, 0, 0, 0, 0xfffe, 0xc000, 0x0201],
        [1, 0, 0, 1, 0, 0, 0, 1],
        [1, 0, 0, 1, 0, 0, 1, 1],
        [1, 0, 1, 1, 1, 1, 1, 1],
        [0xabcd, 0x0ef0, 0x00a1, 0x000b, 0xffff, 0x1000, 0x0100, 0x0010],
      ].map((groups) => ({ owner: name(['v6'], 17), type: 28, rdata: groups.flatMap((g) => [g >> 8, g & 0xff]) })),
      // Character-strings: empty, every byte class, several; SPF the same; no strings at all (the long way).
      { owner: name(['txt'], 17), type: 16, rdata: [0] },
      { owner: name(['txt'], 17), type: 16, rdata: [6, 0x00, 0x1f, 0x7f, 0x80, 0xff, 0x7e, 2, 0x5c, 0x5c, 0, 3, 0x22, 0x22, 0x22] },
      { owner: name(['spf'], 17), type: 99, rdata: [6, ...Buffer.from('v=spf1'), 4, ...Buffer.from(' -al')] },
      { owner: name(['txt'], 17), type: 16, rdata: [] },
    ];
    const body: number[] = [];
    for (const r of records) {
      body.push(...r.owner, r.type >> 8, r.type & 0xff, 0, r.klass ?? 1, 0, 0, 0x0e, 0x10, r.rdata.length >> 8, r.rdata.length & 0xff, ...r.rdata);
    }
    const msg = Buffer.from([0, 1, 0x84, 0, 0, 0, 0, records.length, 0, 0, 0, 0, ...body]);
    const table = scanAnswers(msg);
    expect(table.count).toBe(records.length);
    const fromWire = new CacheRowWriter(3);
    const fromRecords = new CacheRowWriter(3);
    for (let i = 0; i < table.count; i++) fromWire.wire(msg, table.fields, i);
    for (const rr of parseMessage(msg).answers)
      fromRecords.record({
        name: rr.name,
        ttl: rr.ttl,
        class: classNameOf(rr.class),
        type: typeName(rr.type),
        rdata: renderRdata(decodeRdata(rr.type, msg, rr.rdataOffset, rr.rdataLength)),
      });
    const text = fromWire.take().toString('utf8');
    expect(text).toBe(fromRecords.take().toString('utf8'));
    const rows = text
      .split('\n')
      .slice(0, -1)
      .map((l) => l.split('\t'));
    expect(rows[0]).toEqual(['-1', '3', 'test.example.host', '2', 'host.example.test', 'A', 'IN', '3600', '192.0.2.1']);
    // COPY doubles the backslashes of presentation escapes and writes tab, newline and CR as \t \n \r.
    expect(rows[1]!.slice(2, 6)).toEqual([String.raw`test.example.a\\032b`, '2', String.raw`a\\032b.example.test`, 'TXT']);
    expect(rows[1]![8]).toBe(String.raw`"x\\009y" "\\010\\013\\\\\\""`);
    expect(rows[5]!.slice(2, 9)).toEqual(['.', '1', '.', 'NS', 'IN', '3600', 'ns1.example.test']);
    expect(rows[6]!.slice(5)).toEqual(['TYPE65280', 'IN', '3600', String.raw`\\# 3 010203`]);
    expect(rows[7]!.slice(5)).toEqual(['AAAA', 'CLASS3', '3600', '2001:db8::1']);
    expect(rows.slice(9, 18).map((r) => r[8])).toEqual([
      '::',
      '::1',
      '1::',
      '::ffff:192.0.2.1',
      '::fffe:c000:201',
      '1:0:0:1::1',
      '1::1:0:0:1:1',
      '1:0:1:1:1:1:1:1',
      'abcd:ef0:a1:b:ffff:1000:100:10',
    ]);
    expect(rows.slice(18).map((r) => r[8])).toEqual(['""', String.raw`"\\000\\031\\127\\128\\255~" "\\\\\\\\" "" "\\"\\"\\""`, '"v=spf1" " -al"', '']);
  });
});

describe('malformed names', () => {
  it('are refused with the same error by the full parse and by the transfer scan', () => {
    const header = [0, 1, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0];
    const record = (owner: number[]) => Buffer.from([...header, ...owner, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
    const long = Array.from({ length: 5 }, () => [63, ...Array<number>(63).fill(0x61)]).flat();
    const cases: Array<[string, Buffer, RegExp]> = [
      ['pointer forward', record([0xc0, 40]), /does not point backwards/],
      ['pointer to itself', record([0xc0, 12]), /does not point backwards/],
      ['label past the end', Buffer.from([...header, 10, 0x61, 0x62]), /label runs past the end/],
      ['longer than 255 octets', record([...long, 0]), /longer than 255 octets/],
      ['extended label type', record([0x40, 0]), /unsupported label type/],
      ['truncated pointer', Buffer.from([...header, 0xc0]), /truncated compression pointer/],
    ];
    for (const [what, msg, error] of cases) {
      expect(() => parseMessage(msg), what).toThrow(error);
      expect(() => scanAnswers(msg), what).toThrow(error);
    }
  });
});

describe('UPDATE', () => {
  it('adds, replaces and deletes a record with signed updates, seen by an independent dig', async () => {
    const name = `api.${EDIT}`;
    await client.update(EDIT, [{ op: 'add', name, type: 'A', ttl: 120, rdata: '192.0.2.50' }], [], { verify: true });
    expect(await digShort(name, 'A')).toEqual(['192.0.2.50']);

    // Replace = delete old + add new in one message (atomic).
    await client.update(
      EDIT,
      [
        { op: 'delete', name, type: 'A', rdata: '192.0.2.50' },
        { op: 'add', name, type: 'A', ttl: 120, rdata: '192.0.2.51' },
      ],
      [],
      { verify: true },
    );
    expect(await digShort(name, 'A')).toEqual(['192.0.2.51']);

    await client.update(EDIT, [{ op: 'delete', name, type: 'A', rdata: '192.0.2.51' }], [], { verify: true });
    expect(await digShort(name, 'A')).toEqual([]);
    expect((await client.query(name, 'A')).rcode).toBe('NXDOMAIN');
  });

  it('applies several operations of different kinds in one message', async () => {
    const before = await client.soaSerial(EDIT);
    await client.update(
      EDIT,
      [
        { op: 'add', name: `batch.${EDIT}`, type: 'TXT', ttl: 300, rdata: 'hello batch' },
        // An in-zone MX target must have an address record, or BIND refuses the whole update.
        { op: 'add', name: `batch.${EDIT}`, type: 'MX', ttl: 300, rdata: `10 www.${EDIT}` },
        { op: 'add', name: `_sip._tcp.${EDIT}`, type: 'SRV', ttl: 300, rdata: `10 20 5060 sip.${EDIT}` },
        { op: 'add', name: EDIT, type: 'CAA', ttl: 300, rdata: '0 issue "letsencrypt.org"' },
        { op: 'add', name: `v6.${EDIT}`, type: 'AAAA', ttl: 300, rdata: '2001:DB8:0:0::1' },
        { op: 'deleteRRset', name: `old.${EDIT}`, type: 'TXT' },
        { op: 'delete', name: `multi.${EDIT}`, type: 'A', rdata: '192.0.2.20' },
      ],
      [],
      { verify: true },
    );
    expect(await digShort(`batch.${EDIT}`, 'TXT')).toEqual(['"hello batch"']);
    expect(await digShort(`batch.${EDIT}`, 'MX')).toEqual([`10 www.${EDIT}.`]);
    expect(await digShort(`_sip._tcp.${EDIT}`, 'SRV')).toEqual([`10 20 5060 sip.${EDIT}.`]);
    expect(await digShort(EDIT, 'CAA')).toEqual(['0 issue "letsencrypt.org"']);
    expect(await digShort(`v6.${EDIT}`, 'AAAA')).toEqual(['2001:db8::1']);
    expect(await digShort(`old.${EDIT}`, 'TXT')).toEqual([]);
    expect(await digShort(`multi.${EDIT}`, 'A')).toEqual(['192.0.2.21']);
    // One message = one transaction = one serial step.
    expect(await client.soaSerial(EDIT)).toBe(before + 1);

    // Delete the whole name; read-back checks nothing is left there.
    await client.update(EDIT, [{ op: 'deleteName', name: `batch.${EDIT}` }], [], { verify: true });
    expect(await named.dig(['+short', '+norecurse', `batch.${EDIT}`, 'ANY'], { signed: false })).toBe('');
  });

  it('a "no CNAME" prerequisite stops an A add at a CNAME name, and nothing changes', async () => {
    const name = `cn.${EDIT}`;
    const serial = await client.soaSerial(EDIT);
    const attempt = client.update(EDIT, [{ op: 'add', name, type: 'A', ttl: 60, rdata: '192.0.2.99' }], [noCname(name)]);
    await expect(attempt).rejects.toBeInstanceOf(DnsRcodeError);
    await expect(attempt).rejects.toMatchObject({ code: 'YXRRSET', rcode: 7, prerequisiteFailed: true });
    expect(await digShort(name, 'CNAME')).toEqual([`www.${EDIT}.`]);
    expect((await client.query(name, 'A')).answers.filter((r) => r.type === 'A' && r.name === name)).toEqual([]);
    expect(await client.soaSerial(EDIT)).toBe(serial);

    // The same prerequisite lets the add through where there is no CNAME.
    await client.update(EDIT, [{ op: 'add', name: `plain.${EDIT}`, type: 'A', ttl: 60, rdata: '192.0.2.98' }], [noCname(`plain.${EDIT}`)], { verify: true });
    expect(await digShort(`plain.${EDIT}`, 'A')).toEqual(['192.0.2.98']);
  });

  it('maps other prerequisite failures and zone errors to their RCODEs', async () => {
    await expect(
      client.update(EDIT, [{ op: 'add', name: `x.${EDIT}`, type: 'A', ttl: 60, rdata: '192.0.2.1' }], [{ require: 'nameNotInUse', name: `www.${EDIT}` }]),
    ).rejects.toMatchObject({
      code: 'YXDOMAIN',
    });
    await expect(
      client.update(
        EDIT,
        [{ op: 'add', name: `x.${EDIT}`, type: 'A', ttl: 60, rdata: '192.0.2.1' }],
        [{ require: 'rrsetExists', name: `www.${EDIT}`, type: 'MX' }],
      ),
    ).rejects.toMatchObject({
      code: 'NXRRSET',
    });
    await expect(
      client.update(EDIT, [{ op: 'add', name: `x.${EDIT}`, type: 'A', ttl: 60, rdata: '192.0.2.1' }], [{ require: 'nameInUse', name: `nothing.${EDIT}` }]),
    ).rejects.toMatchObject({
      code: 'NXDOMAIN',
      prerequisiteFailed: true,
    });
    // BIND's integrity check refuses an MX whose in-zone target has no address; nothing of the message is applied.
    const refused = client.update(EDIT, [
      { op: 'add', name: `r.${EDIT}`, type: 'TXT', ttl: 60, rdata: 'part of a refused update' },
      { op: 'add', name: `r.${EDIT}`, type: 'MX', ttl: 60, rdata: `10 nomail.${EDIT}` },
    ]);
    await expect(refused).rejects.toMatchObject({ name: 'DnsRcodeError', code: 'REFUSED', prerequisiteFailed: false });
    expect(await digShort(`r.${EDIT}`, 'TXT')).toEqual([]);
    // A zone this server does not serve.
    await expect(client.update('nowhere.test', [{ op: 'add', name: 'a.nowhere.test', type: 'A', ttl: 60, rdata: '192.0.2.1' }])).rejects.toMatchObject({
      code: 'NOTAUTH',
    });
    expect(await digShort(`x.${EDIT}`, 'A')).toEqual([]);
  });

  it('detects by read-back that BIND acknowledged but ignored a conflicting CNAME add', async () => {
    const name = `www.${EDIT}`; // has an A record
    const serial = await client.soaSerial(EDIT);
    const attempt = client.update(EDIT, [{ op: 'add', name, type: 'CNAME', ttl: 60, rdata: `elsewhere.${EDIT}` }], [], { verify: true });
    await expect(attempt).rejects.toBeInstanceOf(UpdateNotAppliedError);
    const err = (await attempt.catch((e: unknown) => e)) as UpdateNotAppliedError;
    expect(err.mismatches).toEqual([expect.objectContaining({ name, type: 'CNAME', rdata: `elsewhere.${EDIT}` })]);
    expect(await digShort(name, 'CNAME')).toEqual([]);
    expect(await digShort(name, 'A')).toEqual(['192.0.2.10']);

    // Without verify the same update "succeeds": the server said NOERROR.
    await expect(client.update(EDIT, [{ op: 'add', name, type: 'CNAME', ttl: 60, rdata: `elsewhere.${EDIT}` }])).resolves.toMatchObject({
      rcode: 'NOERROR',
      verified: false,
    });
    // And the other direction: data beside an existing CNAME.
    const cnameSide = client.update(EDIT, [{ op: 'add', name: `cn.${EDIT}`, type: 'TXT', ttl: 60, rdata: 'beside a cname' }], [], { verify: true });
    await expect(cnameSide).rejects.toMatchObject({ name: 'UpdateNotAppliedError' });
    const e2 = (await cnameSide.catch((e: unknown) => e)) as UpdateNotAppliedError;
    expect(e2.mismatches[0]!.problem).toMatch(/CNAME/);
    expect(await client.soaSerial(EDIT)).toBeGreaterThanOrEqual(serial);
  });

  it('writes a 600-byte TXT split into character-strings and reads it back intact', async () => {
    const value = Array.from({ length: 600 }, (_, i) => 'abcdefghijklmnopqrstuvwxyz0123456789'[i % 36]).join('');
    const name = `_acme-challenge.long.${EDIT}`;
    await client.update(EDIT, [{ op: 'add', name, type: 'TXT', ttl: 60, rdata: value }], [], { verify: true });

    const rec = (await client.query(name, 'TXT')).answers.find((r) => r.type === 'TXT')!;
    const parsed = parseRdata('TXT', rec.rdata, { lenient: true });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok || parsed.value.type !== 'TXT') return;
    expect(parsed.value.strings.map((s) => s.length)).toEqual([255, 255, 90]);
    expect(txtValue(parsed.value)).toBe(value);
    // dig sees three strings that join to the value.
    const dug = (await digShort(name, 'TXT'))[0]!;
    expect(dug.match(/"[^"]*"/g)!.map((s) => s.slice(1, -1))).toEqual([value.slice(0, 255), value.slice(255, 510), value.slice(510)]);
  });

  it('sees the SOA serial change after a change made with nsupdate', async () => {
    const before = await soaSerial(EDIT, opts);
    await named.nsupdate([`zone ${EDIT}`, `update add nsu.${EDIT} 300 IN A 192.0.2.77`]);
    const after = await soaSerial(EDIT, opts);
    expect(after).toBeGreaterThan(before);
    const digSerial = Number((await named.dig(['+short', '+norecurse', EDIT, 'SOA'], { signed: false })).trim().split(/\s+/)[2]);
    expect(after).toBe(digSerial);
    expect((await query(`nsu.${EDIT}`, 'A', opts)).answers.map((r) => r.rdata)).toEqual(['192.0.2.77']);
  });
});

describe('zone file reads', () => {
  it('reads the zone file into exactly the AXFR content', async () => {
    const fromFile = await readZoneFile(BIG, named.zoneFile(BIG));
    const fromAxfr = await axfr(BIG, opts);
    expect(fromFile).toHaveLength(BIG_COUNT + 3);
    expect(sortRecords(fromFile)).toEqual(sortRecords(fromAxfr.records));
  });

  it('with the journal applied, a dynamically updated zone file equals AXFR; without it, it is older', async () => {
    const live = await axfr(EDIT, opts);
    const withJournal = await readZoneFile(EDIT, named.zoneFile(EDIT), { journal: true });
    expect(sortRecords(withJournal)).toEqual(sortRecords(live.records));
    const fileOnly = await readZoneFile(EDIT, named.zoneFile(EDIT));
    expect(fileOnly.find((r) => r.type === 'SOA')!.rdata).toMatch(/ 100 3600 /);
    expect(sortRecords(fileOnly)).not.toEqual(sortRecords(live.records));
  });
});
