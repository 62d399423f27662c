import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboundPolicy, OutboundRefused } from '../src/outbound.js';

let server: Server;
let port: number;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/ok') return res.end('fine');
    if (req.url === '/to-private') return res.writeHead(302, { location: 'http://10.1.2.3/secret' }).end();
    if (req.url === '/to-metadata') return res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    if (req.url === '/to-ok') return res.writeHead(307, { location: '/ok' }).end();
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => server.close());

describe('OutboundPolicy (SSRF guard)', () => {
  const strict = new OutboundPolicy();
  const loopbackAllowed = new OutboundPolicy(['127.0.0.0/8']);

  it('refuses loopback, private, link-local, metadata and other schemes by default', async () => {
    for (const url of [
      `http://127.0.0.1:${port}/ok`,
      'http://10.0.0.8/',
      'http://192.168.1.1/',
      'http://172.20.0.1/',
      'http://169.254.169.254/latest/',
      'http://[::1]/',
      'http://[fd00::1]/',
      'http://[fe80::1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://0.0.0.0/',
      'http://localhost/',
      'file:///etc/passwd',
      'ftp://example.org/',
      'http://user:pw@example.org/',
      'not a url',
    ]) {
      await expect(strict.assertPublic(url), url).rejects.toBeInstanceOf(OutboundRefused);
    }
    await expect(strict.fetch(`http://127.0.0.1:${port}/ok`)).rejects.toBeInstanceOf(OutboundRefused);
  });

  it('checks where a host name resolves, at submission and at connection time', async () => {
    // A policy that allows some other range still refuses a name resolving to loopback.
    const other = new OutboundPolicy(['10.9.9.0/24']);
    await expect(other.assertPublic(`http://localhost:${port}/ok`)).rejects.toThrow(/resolves to a blocked address/);
    await expect(other.fetch(`http://localhost:${port}/ok`)).rejects.toThrow(/resolves to a blocked address/);
  });

  it('refuses local names with a trailing dot like without it', () => {
    for (const host of ['localhost.', 'localhost..', 'LOCALHOST.', 'printer.local.', 'metadata.google.internal.', 'app.localhost.']) {
      expect(() => strict.checkUrl(`http://${host}/x`), host).toThrow(/is not allowed/);
    }
    // Only with no allow-list: a name is then judged by where it resolves.
    expect(() => new OutboundPolicy(['10.9.9.0/24']).checkUrl('http://localhost./x')).not.toThrow();
  });

  it('judges IPv6 forms that carry an IPv4 address by that address', () => {
    const blocked = [
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:169.254.169.254',
      '::ffff:10.1.2.3', // IPv4-mapped
      '::ffff:0:7f00:1', // IPv4-translated (SIIT)
      '64:ff9b::127.0.0.1',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::10.0.0.1', // NAT64 well-known prefix
      '2002:7f00:1::',
      '2002:a9fe:a9fe::1',
      '2002:c0a8:101:1::5', // 6to4 of 127.0.0.1, 169.254.169.254, 192.168.1.1
      '::127.0.0.1',
      '::10.0.0.1', // IPv4-compatible (deprecated)
      '64:ff9b:1::8.8.8.8', // local-use NAT64: where its IPv4 part sits is the operator's choice
      '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo
      'fec0::1', // site-local (deprecated, still routed in places)
    ];
    for (const ip of blocked) expect(strict.isBlocked(ip), ip).toBe(true);
    for (const ip of ['::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '2606:4700::1111', '8.8.8.8']) {
      expect(strict.isBlocked(ip), ip).toBe(false);
    }
    // An allowed IPv4 range covers its IPv6 spellings too; nothing else opens up.
    expect(loopbackAllowed.isBlocked('::ffff:127.0.0.1')).toBe(false);
    expect(loopbackAllowed.isBlocked('64:ff9b::7f00:1')).toBe(false);
    expect(loopbackAllowed.isBlocked('64:ff9b::a9fe:a9fe')).toBe(true);
    expect(loopbackAllowed.isBlocked('2002:a00:1::')).toBe(true);
    // Whatever is not an address is blocked.
    for (const junk of ['', 'localhost', '1.2.3.4.5', '::g']) expect(strict.isBlocked(junk), junk).toBe(true);
  });

  it('refuses such addresses as URL hosts', async () => {
    for (const host of ['[::ffff:127.0.0.1]', '[64:ff9b::7f00:1]', '[2002:a9fe:a9fe::]', '[::ffff:a9fe:a9fe]', '[::127.0.0.1]']) {
      await expect(strict.assertPublic(`http://${host}/latest/`), host).rejects.toThrow(/is not allowed/);
      await expect(strict.fetch(`http://${host}:${port}/ok`), host).rejects.toThrow(/is not allowed/);
    }
  });

  it('takes the allow-list in the syntax of OUTBOUND_ALLOW_RANGES and refuses anything else', () => {
    expect(() => new OutboundPolicy(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::1'])).not.toThrow();
    for (const bad of ['10.0.0.0/33', 'example.org', '10.0.0/8', '1.2.3.4/8/8', '']) {
      expect(() => new OutboundPolicy([bad]), bad).toThrow(/not an address or CIDR range/);
    }
  });

  it('allows ranges an administrator configured, and re-checks every redirect hop', async () => {
    expect(await (await loopbackAllowed.fetch(`http://127.0.0.1:${port}/ok`)).text()).toBe('fine');
    expect(await (await loopbackAllowed.fetch(`http://localhost:${port}/to-ok`)).text()).toBe('fine');
    await expect(loopbackAllowed.fetch(`http://127.0.0.1:${port}/to-private`)).rejects.toThrow(/10\.1\.2\.3 is not allowed/);
    await expect(loopbackAllowed.fetch(`http://127.0.0.1:${port}/to-metadata`)).rejects.toThrow(/169\.254\.169\.254 is not allowed/);
  });
});
