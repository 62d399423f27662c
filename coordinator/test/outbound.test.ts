import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboundPolicy, OutboundRefused } from '../src/http/outbound.js';

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
      `http://127.0.0.1:${port}/ok`, 'http://10.0.0.8/', 'http://192.168.1.1/', 'http://172.20.0.1/', 'http://169.254.169.254/latest/',
      'http://[::1]/', 'http://[fd00::1]/', 'http://[fe80::1]/', 'http://[::ffff:127.0.0.1]/', 'http://0.0.0.0/', 'http://localhost/',
      'file:///etc/passwd', 'ftp://example.org/', 'http://user:pw@example.org/', 'not a url',
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

  it('allows ranges an administrator configured, and re-checks every redirect hop', async () => {
    expect(await (await loopbackAllowed.fetch(`http://127.0.0.1:${port}/ok`)).text()).toBe('fine');
    expect(await (await loopbackAllowed.fetch(`http://localhost:${port}/to-ok`)).text()).toBe('fine');
    await expect(loopbackAllowed.fetch(`http://127.0.0.1:${port}/to-private`)).rejects.toThrow(/10\.1\.2\.3 is not allowed/);
    await expect(loopbackAllowed.fetch(`http://127.0.0.1:${port}/to-metadata`)).rejects.toThrow(/169\.254\.169\.254 is not allowed/);
  });
});
