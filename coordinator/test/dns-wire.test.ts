import { createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import dnsPacket from 'dns-packet';
import {
  DnsRcodeError,
  InvalidUpdateError,
  TsigError,
  TsigVerifier,
  appendTsigError,
  buildUpdate,
  expectations,
  extractTsig,
  fieldErrorsToRecord,
  isInZone,
  normalizeName,
  parseKeyFile,
  parseMessage,
  parsePresentationLine,
  parseRdata,
  renderRdata,
  signMessage,
  soaSerial,
  splitCharacterStrings,
  txtValue,
  validateName,
  validateRecord,
  validateTtl,
  type RecordData,
  type TsigKey,
} from '../src/dns/wire/index.js';

const KEY: TsigKey = { name: 'test-key', secret: Buffer.from([...Array(32).keys()]).toString('base64') };
const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const flip = (buf: Buffer, at: number, mask: number) => buf.writeUInt8(buf.readUInt8(at) ^ mask, at);

// A query for example.org/SOA, id 0x1234, as bytes (RFC 1035 §4.1).
const QUERY = hex('1234 0000 0001 0000 0000 0000  07 6578616d706c65 03 6f7267 00  0006 0001');
// The same as a response (QR, AA) with no records.
const RESPONSE = hex('1234 8400 0001 0000 0000 0000  07 6578616d706c65 03 6f7267 00  0006 0001');
// Expected MACs computed outside this code: the RFC 8945 §4.3 digest input written out by hand and
// run through `openssl dgst -sha256 -mac HMAC -macopt hexkey:000102…1f`.
const REQUEST_MAC = '1979d4a4aaf136748c85ee2d9b0136ec6a4758e1a47594ee1e7a0f9b7005a55d';
const RESPONSE_MAC = 'f14b204e3edaf39de5ba345ae27e5c1238da045122b5cea73ee07abff4eaa13e';
const T0 = 1_700_000_000;

describe('names', () => {
  it('accepts host names, underscore owners and a leftmost wildcard, normalised', () => {
    expect(validateName('WWW.Example.ORG.', 'owner')).toEqual({ ok: true, value: 'www.example.org' });
    expect(validateName('_acme-challenge.example.org', 'owner')).toEqual({ ok: true, value: '_acme-challenge.example.org' });
    expect(validateName('_sip._tcp.example.org', 'owner').ok).toBe(true);
    expect(validateName('*.example.org', 'owner')).toEqual({ ok: true, value: '*.example.org' });
    expect(validateName('mail-1.example.org', 'hostname').ok).toBe(true);
  });

  it('rejects bad names with the field and a reason', () => {
    const bad: Array<[string, 'owner' | 'hostname', RegExp]> = [
      ['a.*.example.org', 'owner', /leftmost/],
      ['a*.example.org', 'owner', /whole label/],
      ['*.example.org', 'hostname', /wildcard/],
      ['_x.example.org', 'hostname', /host name label/],
      ['-a.example.org', 'owner', /must not start or end/],
      ['a..example.org', 'owner', /empty label/],
      [`${'a'.repeat(64)}.example.org`, 'owner', /at most 63/],
      ['exa mple.org', 'owner', /ASCII without spaces/],
      ['bücher.example', 'owner', /punycode/],
      ['a\\.b.example', 'owner', /backslash/],
      ['', 'owner', /required/],
    ];
    for (const [name, kind, re] of bad) {
      const r = validateName(name, kind, { field: 'domain' });
      expect(r.ok, name).toBe(false);
      if (!r.ok) {
        expect(r.errors[0]!.field).toBe('domain');
        expect(r.errors[0]!.message).toMatch(re);
      }
    }
  });

  it('limits names to 253 characters / 255 octets', () => {
    const label = 'a'.repeat(63);
    const n253 = [label, label, label, 'a'.repeat(61)].join('.'); // 63*3 + 61 + 3 dots = 253
    expect(n253.length).toBe(253);
    expect(validateName(n253, 'owner').ok).toBe(true);
    expect(validateName(`${n253}.`, 'owner').ok).toBe(true); // the trailing dot does not count
    const r = validateName(`a${n253}`, 'owner');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0]!.message).toMatch(/254 characters/);
  });

  it('decides zone membership by labels', () => {
    expect(isInZone('www.example.org.', 'Example.ORG')).toBe(true);
    expect(isInZone('example.org', 'example.org')).toBe(true);
    expect(isInZone('badexample.org', 'example.org')).toBe(false);
    expect(isInZone('example.org', 'www.example.org')).toBe(false);
    expect(normalizeName(' Foo.Bar. ')).toBe('foo.bar');
  });

  it('bounds TTLs to 0..2147483647', () => {
    expect(validateTtl(0)).toEqual({ ok: true, value: 0 });
    expect(validateTtl(2147483647)).toEqual({ ok: true, value: 2147483647 });
    expect(validateTtl('300')).toEqual({ ok: true, value: 300 });
    for (const bad of [-1, 2147483648, 1.5, 'abc', null, {}]) expect(validateTtl(bad).ok, JSON.stringify(bad)).toBe(false);
  });
});

describe('record data', () => {
  const parsed = (type: string, text: string): RecordData => {
    const r = parseRdata(type, text);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    return r.value;
  };

  it('parses and renders each writable type canonically', () => {
    expect(renderRdata(parsed('A', '192.0.2.1'))).toBe('192.0.2.1');
    expect(renderRdata(parsed('AAAA', '2001:DB8:0:0:0:0:0:1'))).toBe('2001:db8::1');
    expect(renderRdata(parsed('AAAA', '2001:db8:0:1:0:0:0:0'))).toBe('2001:db8:0:1::');
    expect(renderRdata(parsed('AAAA', '::ffff:192.0.2.1'))).toBe('::ffff:192.0.2.1');
    expect(renderRdata(parsed('CNAME', 'Target.Example.org.'))).toBe('target.example.org');
    expect(renderRdata(parsed('MX', '10 mail.example.org'))).toBe('10 mail.example.org');
    expect(renderRdata(parsed('MX', '0 .'))).toBe('0 .');
    expect(renderRdata(parsed('SRV', '10 20 5060 sip.example.org.'))).toBe('10 20 5060 sip.example.org');
    expect(renderRdata(parsed('CAA', '0 issue "letsencrypt.org"'))).toBe('0 issue "letsencrypt.org"');
    expect(renderRdata(parsed('CAA', '128 IODEF mailto:a@example.org'))).toBe('128 iodef "mailto:a@example.org"');
    expect(renderRdata(parsed('PTR', 'host.example.org'))).toBe('host.example.org');
    expect(renderRdata(parsed('TXT', 'v=spf1 -all'))).toBe('"v=spf1 -all"');
    expect(renderRdata(parsed('TXT', '"a\\"b" "c\\\\d" "\\195\\169"'))).toBe('"a\\"b" "c\\\\d" "\\195\\169"');
  });

  it('rejects malformed data with the target field', () => {
    const bad: Array<[string, string, RegExp]> = [
      ['A', '192.0.2.256', /IPv4/],
      ['A', '01.2.3.4', /IPv4/],
      ['AAAA', '2001:db8::1%eth0', /IPv6/],
      ['AAAA', '192.0.2.1', /IPv6/],
      ['MX', 'mail.example.org', /preference exchange/],
      ['MX', '70000 mail.example.org', /between 0 and 65535/],
      ['MX', '10 _mail.example.org', /host name/],
      ['SRV', '10 20 sip.example.org', /priority weight port target/],
      ['SRV', '10 20 99999 sip.example.org', /port/],
      ['CAA', '0 is-sue "x"', /tag/],
      ['CAA', '256 issue "x"', /flags/],
      ['NS', '*.example.org', /wildcard/],
      ['TXT', '"unterminated', /unterminated/],
    ];
    for (const [type, text, re] of bad) {
      const r = parseRdata(type, text, { field: 'target' });
      expect(r.ok, `${type} ${text}`).toBe(false);
      if (!r.ok) {
        expect(r.errors[0]!.field).toBe('target');
        expect(r.errors[0]!.message).toMatch(re);
      }
    }
  });

  it('splits TXT longer than 255 bytes into character-strings and joins them back', () => {
    const value = 'x'.repeat(600);
    const data = parsed('TXT', value);
    if (data.type !== 'TXT') throw new Error('not TXT');
    expect(data.strings.map((s) => s.length)).toEqual([255, 255, 90]);
    expect(txtValue(data)).toBe(value);
    // Rendered as quoted strings, and reading that presentation back gives the same value.
    const rendered = renderRdata(data);
    expect(rendered).toBe(`"${'x'.repeat(255)}" "${'x'.repeat(255)}" "${'x'.repeat(90)}"`);
    expect(txtValue(parsed('TXT', rendered))).toBe(value);
    // A quoted string over 255 bytes is split too.
    const q = parsed('TXT', `"${'y'.repeat(300)}"`);
    expect(q.type === 'TXT' && q.strings.map((s) => s.length)).toEqual([255, 45]);
  });

  it('does not cut a UTF-8 character when splitting', () => {
    const value = `${'a'.repeat(254)}é${'b'.repeat(10)}`; // é is 2 bytes at offsets 254..255
    const parts = splitCharacterStrings(Buffer.from(value));
    expect(parts.map((p) => p.length)).toEqual([254, 12]);
    expect(parts.every((p) => p.toString('utf8').indexOf('\ufffd') < 0)).toBe(true);
    expect(Buffer.concat(parts).toString()).toBe(value);
  });

  it('refuses TXT record data over 65535 bytes', () => {
    const r = parseRdata('TXT', 'z'.repeat(65_300));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0]!.message).toMatch(/at most 65535/);
  });

  it('validates a whole payload and reports every failing field', () => {
    const r = validateRecord({ domain: 'www.other.org', type: 'MX', target: 'mail', ttl: -5 }, { zone: 'example.org' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const byField = fieldErrorsToRecord(r.errors);
    expect(Object.keys(byField).sort()).toEqual(['domain', 'target', 'ttl']);
    expect(byField.domain![0]).toMatch(/not in zone example.org/);

    const apex = validateRecord({ domain: 'example.org', type: 'CNAME', target: 'x.example.net', ttl: 60 }, { zone: 'example.org' });
    expect(apex.ok).toBe(false);
    const typeErr = validateRecord({ domain: 'a.example.org', type: 'HINFO', target: 'x', ttl: 60 });
    expect(!typeErr.ok && typeErr.errors[0]!.field).toBe('type');

    const good = validateRecord({ domain: '_acme-challenge.Example.org.', type: 'txt', target: 'token-123', ttl: '120' }, { zone: 'example.org' });
    expect(good).toMatchObject({ ok: true, value: { name: '_acme-challenge.example.org', type: 'TXT', ttl: 120, rdata: '"token-123"' } });
  });

  it('reads BIND presentation lines (escaped names, quoted TXT) into the same rendering', () => {
    expect(parsePresentationLine('Up.Example.test.\t300\tIN\tTXT\t"a\\"b;c\\\\d" "h\\195\\169llo"')).toEqual({
      name: 'up.example.test',
      ttl: 300,
      class: 'IN',
      type: 'TXT',
      rdata: '"a\\"b;c\\\\d" "h\\195\\169llo"',
    });
    expect(parsePresentationLine('a\\.b.example.test. 60 IN CNAME Target.example.test.')?.name).toBe('a\\.b.example.test');
    expect(parsePresentationLine('x.example.test. 60 IN TYPE65534 \\# 3 0A0B0C')?.rdata).toBe('\\# 3 0a0b0c');
    expect(parsePresentationLine('; comment')).toBeNull();
  });
});

describe('TSIG', () => {
  it('signs a request with the MAC of a hand-computed RFC 8945 digest', () => {
    const { message, mac } = signMessage(QUERY, KEY, { timeSigned: T0 });
    expect(mac.toString('hex')).toBe(REQUEST_MAC);
    // The message is the original with ARCOUNT 1 and the TSIG RR appended, field by field.
    expect(message.subarray(0, 10)).toEqual(QUERY.subarray(0, 10));
    expect(message.readUInt16BE(10)).toBe(1);
    expect(message.subarray(12, QUERY.length)).toEqual(QUERY.subarray(12));
    const rr = message.subarray(QUERY.length);
    const expectedRR = hex(
      `08 746573742d6b6579 00  00fa 00ff 00000000  ${(13 + 6 + 2 + 2 + 32 + 6).toString(16).padStart(4, '0')}` +
        `0b 686d61632d736861323536 00  00006553f100  012c  0020 ${REQUEST_MAC}  1234  0000  0000`,
    );
    expect(rr.toString('hex')).toBe(expectedRR.toString('hex'));
  });

  it('verifies a signed response against the request MAC (known vector), and rejects tampering', () => {
    const signed = signMessage(RESPONSE, KEY, { timeSigned: T0 + 1, requestMac: hex(REQUEST_MAC) });
    expect(signed.mac.toString('hex')).toBe(RESPONSE_MAC);
    const v = new TsigVerifier(KEY, hex(REQUEST_MAC), { now: () => T0 + 2 });
    const out = v.verify(signed.message);
    expect(out.signed).toBe(true);
    expect(out.message).toEqual(RESPONSE);
    v.finish();

    const tamperedBody = Buffer.from(signed.message);
    flip(tamperedBody, 3, 0x01); // an RCODE bit
    expect(() => new TsigVerifier(KEY, hex(REQUEST_MAC), { now: () => T0 }).verify(tamperedBody)).toThrow(
      expect.objectContaining({ name: 'TsigError', code: 'BADSIG', source: 'local' }),
    );
    const tamperedMac = Buffer.from(signed.message);
    flip(tamperedMac, tamperedMac.length - 7, 0x80); // last MAC byte (Original ID, Error, Other Len follow)
    expect(() => new TsigVerifier(KEY, hex(REQUEST_MAC), { now: () => T0 }).verify(tamperedMac)).toThrow(expect.objectContaining({ code: 'BADSIG' }));
    // Same message verified against a different request MAC: the answer is not for our request.
    expect(() => new TsigVerifier(KEY, Buffer.alloc(32, 1), { now: () => T0 }).verify(signed.message)).toThrow(expect.objectContaining({ code: 'BADSIG' }));
    // Another secret under the same name.
    const otherSecret = { ...KEY, secret: Buffer.alloc(32, 7) };
    expect(() => new TsigVerifier(otherSecret, hex(REQUEST_MAC), { now: () => T0 }).verify(signed.message)).toThrow(
      expect.objectContaining({ code: 'BADSIG' }),
    );
  });

  it('maps key, time, truncation and missing-signature failures to typed errors', () => {
    const req = hex(REQUEST_MAC);
    const good = signMessage(RESPONSE, KEY, { timeSigned: T0, requestMac: req }).message;
    const check = (msg: Buffer, key: TsigKey, now: number) => {
      try {
        new TsigVerifier(key, req, { now: () => now }).verify(msg);
        return null;
      } catch (err) {
        expect(err).toBeInstanceOf(TsigError);
        return { code: (err as TsigError).code, source: (err as TsigError).source };
      }
    };
    expect(check(good, KEY, T0 + 300)).toBeNull(); // exactly at the fudge edge
    expect(check(good, KEY, T0 + 301)).toEqual({ code: 'BADTIME', source: 'local' });
    expect(check(good, KEY, T0 - 301)).toEqual({ code: 'BADTIME', source: 'local' });
    expect(check(good, { ...KEY, name: 'other-key' }, T0)).toEqual({ code: 'BADKEY', source: 'local' });
    expect(check(RESPONSE, KEY, T0)).toEqual({ code: 'UNSIGNED', source: 'local' });
    for (const [error, code] of [
      [16, 'BADSIG'],
      [17, 'BADKEY'],
      [22, 'BADTRUNC'],
    ] as const) {
      expect(check(appendTsigError(RESPONSE, KEY.name, error, T0), KEY, T0)).toEqual({ code, source: 'server' });
    }
    // A server BADTIME answer is signed and carries the server's time in Other Data.
    const badtime = signMessage(RESPONSE, KEY, { timeSigned: T0, requestMac: req, error: 18, otherData: hex('00006553f200') }).message;
    expect(check(badtime, KEY, T0)).toEqual({ code: 'BADTIME', source: 'server' });
    // A MAC truncated below 16 bytes: rebuild the TSIG RR with an 8-byte MAC.
    const t = extractTsig(good)!;
    const rdata = Buffer.concat([hex('0b686d61632d73686132353600 00006553f100 012c 0008'), t.tsig.mac.subarray(0, 8), hex('1234 0000 0000')]);
    const rrHead = Buffer.concat([hex('08746573742d6b657900 00fa 00ff 00000000'), Buffer.from([rdata.length >> 8, rdata.length & 0xff])]);
    const truncated = Buffer.concat([good.subarray(0, t.tsig.start), rrHead, rdata]);
    expect(check(truncated, KEY, T0)).toEqual({ code: 'BADTRUNC', source: 'local' });
  });

  it('verifies a multi-message stream with unsigned intermediate messages (prior MAC chained)', () => {
    const req = hex(REQUEST_MAC);
    // Later messages of a transfer: no question, one record each (distinct, so a swap would show).
    const part = (n: number) =>
      dnsPacket.encode({
        type: 'response',
        id: 0x1234,
        flags: dnsPacket.AUTHORITATIVE_ANSWER,
        answers: [{ type: 'A', name: 'example.org', ttl: 60, data: `192.0.2.${n}` }],
      });
    const m1 = signMessage(RESPONSE, KEY, { timeSigned: T0, requestMac: req });
    const u2 = part(2);
    const u3 = part(3);
    const m4 = signMessage(part(4), KEY, { timeSigned: T0 + 1, continuation: { priorMac: m1.mac, unsigned: [u2, u3] } });
    const m5 = signMessage(part(5), KEY, { timeSigned: T0 + 2, continuation: { priorMac: m4.mac, unsigned: [] } });
    const msgs = [m1.message, u2, u3, m4.message, m5.message];
    // dnspython 2.3 (an independent implementation, clock frozen at T0+1) accepted exactly this
    // stream during development, and computed these MACs for messages 4 and 5.
    expect(m4.mac.toString('hex')).toBe('61bddbb612f9f5c2851b6891ed9d998c276f588943b621eb14beabc5f18dad65');
    expect(m5.mac.toString('hex')).toBe('6ed043d83187c405bc78f6a3f8f98e74875299b1e2cf3416b19a75d1b353d686');

    const v = new TsigVerifier(KEY, req, { now: () => T0 });
    expect(msgs.map((m) => v.verify(m).signed)).toEqual([true, false, false, true, true]);
    v.finish();
    expect(v.signedMessages).toBe(3);

    // The unsigned messages are covered by the next signature: altering one breaks message 4.
    const altered = Buffer.from(u3);
    flip(altered, altered.length - 1, 0x01); // 192.0.2.3 -> 192.0.2.2
    const v2 = new TsigVerifier(KEY, req, { now: () => T0 });
    v2.verify(m1.message);
    v2.verify(u2);
    v2.verify(altered);
    expect(() => v2.verify(m4.message)).toThrow(expect.objectContaining({ code: 'BADSIG' }));

    // Ending on unsigned messages is a failure; so is a first message without TSIG.
    const v3 = new TsigVerifier(KEY, req, { now: () => T0 });
    v3.verify(m1.message);
    v3.verify(u2);
    expect(() => v3.finish()).toThrow(expect.objectContaining({ code: 'UNSIGNED' }));
    expect(() => new TsigVerifier(KEY, req).verify(u2)).toThrow(expect.objectContaining({ code: 'UNSIGNED' }));

    // At most 99 unsigned messages in a row.
    const v4 = new TsigVerifier(KEY, req, { now: () => T0 });
    v4.verify(m1.message);
    for (let i = 0; i < 99; i++) v4.verify(u2);
    expect(() => v4.verify(u2)).toThrow(expect.objectContaining({ code: 'UNSIGNED' }));
  });

  it('reads tsig-keygen output', () => {
    const key = parseKeyFile('key "sonar-key" {\n\talgorithm hmac-sha256;\n\tsecret "E9eS8VRGVlreETqtF5m2L2bUsLW80wL/xaAB/YK4rJA=";\n};\n');
    expect(key).toEqual({ name: 'sonar-key', secret: 'E9eS8VRGVlreETqtF5m2L2bUsLW80wL/xaAB/YK4rJA=', algorithm: 'hmac-sha256' });
    expect(() => parseKeyFile('key "k" { algorithm hmac-md5; secret "AAAA"; };')).toThrow(/only hmac-sha256/);
  });
});

describe('UPDATE encoding', () => {
  it('encodes prerequisites and updates with the RFC 2136 classes, in order, in one message', () => {
    const { message } = buildUpdate(
      'example.org',
      [
        { op: 'delete', name: 'www.example.org', type: 'A', rdata: '192.0.2.1' },
        { op: 'add', name: 'www.example.org', type: 'A', ttl: 300, rdata: '192.0.2.2' },
        { op: 'deleteRRset', name: 'old.example.org', type: 'TXT' },
        { op: 'deleteName', name: 'gone.example.org' },
        { op: 'add', name: 'example.org', type: 'MX', ttl: 3600, rdata: '10 mail.example.org' },
      ],
      [
        { require: 'rrsetAbsent', name: 'www.example.org', type: 'CNAME' },
        { require: 'rrsetExists', name: 'example.org', type: 'SOA' },
        { require: 'nameInUse', name: 'www.example.org' },
        { require: 'nameNotInUse', name: 'new.example.org' },
      ],
      0x4242,
    );
    const m = parseMessage(message);
    expect(m.header).toMatchObject({ id: 0x4242, opcode: 5, qr: false, qdcount: 1, ancount: 4, nscount: 5, arcount: 0 });
    expect(m.questions).toEqual([{ name: 'example.org', type: 6, class: 1 }]);
    const shape = (rrs: typeof m.answers) => rrs.map((r) => [r.name, r.type, r.class, r.ttl, r.rdataLength]);
    expect(shape(m.answers)).toEqual([
      ['www.example.org', 5, 254, 0, 0], // CNAME RRset does not exist: class NONE
      ['example.org', 6, 255, 0, 0], // SOA RRset exists: class ANY
      ['www.example.org', 255, 255, 0, 0], // name in use: ANY/ANY
      ['new.example.org', 255, 254, 0, 0], // name not in use: NONE/ANY
    ]);
    expect(shape(m.authorities)).toEqual([
      ['www.example.org', 1, 254, 0, 4], // delete one RR: class NONE with RDATA
      ['www.example.org', 1, 1, 300, 4],
      ['old.example.org', 16, 255, 0, 0], // delete RRset: class ANY
      ['gone.example.org', 255, 255, 0, 0], // delete name: ANY/ANY
      ['example.org', 15, 1, 3600, 2 + 18],
    ]);
    expect(message.subarray(m.authorities[0]!.rdataOffset, m.authorities[0]!.rdataOffset + 4)).toEqual(Buffer.from([192, 0, 2, 1]));
    // dns-packet (an independent decoder) reads the same message.
    const decoded = dnsPacket.decode(message);
    expect(decoded.authorities?.[4]).toMatchObject({ type: 'MX', data: { preference: 10, exchange: 'mail.example.org' } });
  });

  it('refuses invalid operations before sending, naming each', () => {
    try {
      buildUpdate('example.org', [
        { op: 'add', name: 'www.other.org', type: 'A', ttl: 60, rdata: '192.0.2.1' },
        { op: 'add', name: 'a.example.org', type: 'A', ttl: -1, rdata: '300.0.0.1' },
      ]);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidUpdateError);
      const fields = (err as InvalidUpdateError).errors.map((e) => e.field);
      expect(fields).toEqual(['operations[0].name', 'operations[1].ttl', 'operations[1].rdata']);
    }
  });

  it('folds operations into the state a read-back must find', () => {
    const ex = expectations([
      { op: 'add', name: 'a.example.org', type: 'A', ttl: 60, rdata: '192.0.2.1' },
      { op: 'delete', name: 'a.example.org', type: 'A', rdata: '192.0.2.9' },
      { op: 'deleteRRset', name: 'b.example.org', type: 'TXT' },
      { op: 'add', name: 'b.example.org', type: 'TXT', ttl: 60, rdata: 'new' },
      { op: 'add', name: 'c.example.org', type: 'A', ttl: 60, rdata: '192.0.2.3' },
      { op: 'delete', name: 'c.example.org', type: 'A', rdata: '192.0.2.3' },
    ]);
    expect(ex).toEqual([
      { name: 'a.example.org', type: 'A', present: ['192.0.2.1'], absent: ['192.0.2.9'], exhaustive: false },
      { name: 'b.example.org', type: 'TXT', present: ['"new"'], absent: [], exhaustive: true },
      { name: 'c.example.org', type: 'A', present: [], absent: ['192.0.2.3'], exhaustive: false },
    ]);
  });

  it('classifies UPDATE prerequisite failures', () => {
    expect(new DnsRcodeError(7, 'UPDATE').prerequisiteFailed).toBe(true);
    expect(new DnsRcodeError(7, 'UPDATE').code).toBe('YXRRSET');
    expect(new DnsRcodeError(5, 'UPDATE').prerequisiteFailed).toBe(false);
    expect(new DnsRcodeError(3, 'QUERY x A').prerequisiteFailed).toBe(false);
  });
});

describe('TCP client against a scripted server', () => {
  /** A one-shot TCP DNS server: `reply` gets each request frame and returns frames to send (or none: stay silent). */
  async function fakeServer(reply: (request: Buffer) => Buffer[]) {
    const sockets = new Set<Socket>();
    const server = createServer((sock) => {
      sockets.add(sock);
      let buf = Buffer.alloc(0);
      sock.on('data', (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
          const req = buf.subarray(2, 2 + buf.readUInt16BE(0));
          buf = buf.subarray(2 + req.length);
          for (const frame of reply(Buffer.from(req))) {
            const head = Buffer.alloc(2);
            head.writeUInt16BE(frame.length);
            sock.write(Buffer.concat([head, frame]));
          }
        }
      });
      sock.on('error', () => {});
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    return { port, close: () => new Promise<void>((r) => (sockets.forEach((x) => x.destroy()), server.close(() => r()))) };
  }
  /** The request without its TSIG, turned into a response with the given RCODE and an SOA answer. */
  const answer = (request: Buffer, rcode: number, id = request.readUInt16BE(0)) => {
    const q = parseMessage(request).questions[0]!;
    return dnsPacket.encode({
      type: 'response',
      id,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | rcode,
      questions: [{ name: q.name, type: 'SOA', class: 'IN' }],
      answers: rcode
        ? []
        : [
            {
              name: q.name,
              type: 'SOA',
              ttl: 60,
              data: { mname: 'ns1.example.org', rname: 'h.example.org', serial: 42, refresh: 1, retry: 2, expire: 3, minimum: 4 },
            },
          ],
    });
  };

  it('times out when the server stays silent, and reports a refused connection', async () => {
    const silent = await fakeServer(() => []);
    try {
      await expect(soaSerial('example.org', { server: '127.0.0.1', port: silent.port, timeoutMs: 200 })).rejects.toMatchObject({
        name: 'DnsTimeoutError',
        code: 'TIMEOUT',
      });
    } finally {
      await silent.close();
    }
    await expect(soaSerial('example.org', { server: '127.0.0.1', port: silent.port, timeoutMs: 200 })).rejects.toMatchObject({ name: 'DnsConnectionError' });
  });

  it('checks the answer id, requires a signed success, and reports unsigned failures by RCODE', async () => {
    const key = KEY;
    let mode: 'unsigned-ok' | 'unsigned-refused' | 'wrong-id' | 'signed' = 'signed';
    const srv = await fakeServer((req) => {
      const t = extractTsig(req);
      const body = t ? Buffer.concat([t.head, t.rest]) : req;
      if (mode === 'wrong-id') return [answer(body, 0, (body.readUInt16BE(0) + 1) & 0xffff)];
      if (mode === 'unsigned-ok') return [answer(body, 0)];
      if (mode === 'unsigned-refused') return [answer(body, 5)];
      return [signMessage(answer(body, 0), key, { requestMac: t!.tsig.mac }).message];
    });
    const o = { server: '127.0.0.1', port: srv.port, key, timeoutMs: 2000 };
    try {
      expect(await soaSerial('example.org', o)).toBe(42);
      mode = 'unsigned-ok';
      await expect(soaSerial('example.org', o)).rejects.toMatchObject({ name: 'TsigError', code: 'UNSIGNED' });
      mode = 'unsigned-refused';
      await expect(soaSerial('example.org', o)).rejects.toMatchObject({ name: 'DnsRcodeError', code: 'REFUSED' });
      mode = 'wrong-id';
      await expect(soaSerial('example.org', o)).rejects.toMatchObject({ name: 'DnsProtocolError' });
    } finally {
      await srv.close();
    }
  });
});
