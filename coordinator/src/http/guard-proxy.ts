import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { OutboundRefused, type OutboundPolicy } from '@sonar/shared';

/** Request headers that belong to the hop to the proxy, never forwarded. */
const HOP_HEADERS = new Set(['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive', 'te', 'trailer', 'upgrade']);

export interface GuardProxy {
  /** http://127.0.0.1:<port>, for `--proxy` of a child process. */
  url: string;
  /** Targets it refused (with the reason), for the job's runtime log. */
  refusals: string[];
  close(): Promise<void>;
}

/**
 * A loopback-only forward proxy (CONNECT tunnels and absolute-form http requests) that applies the
 * outbound policy to every target a child process connects to. yt-dlp runs behind it when no
 * download proxy is used, so a page cannot point it at a blocked address (metadata service, private
 * networks) through links, redirects or embedded media: every connection is checked at connect time
 * against the address actually dialled.
 */
export async function startGuardProxy(policy: OutboundPolicy): Promise<GuardProxy> {
  const refusals: string[] = [];
  const sockets = new Set<net.Socket | Duplex>();
  const track = <T extends net.Socket | Duplex>(s: T): T => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    return s;
  };

  const server = http.createServer((req, res) => {
    let target: URL;
    try {
      target = new URL(req.url ?? '');
      if (target.protocol !== 'http:') throw new OutboundRefused('only http requests are forwarded; use CONNECT for https');
    } catch (err) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(`${(err as Error).message}\n`);
      return;
    }
    void (async () => {
      let address: string;
      try {
        policy.checkUrl(target.toString());
        address = (await policy.lookupChecked(target.hostname))[0]!.address;
      } catch (err) {
        refusals.push(`${target.host}: ${(err as Error).message}`);
        res.writeHead(403, { 'content-type': 'text/plain' }).end(`refused: ${(err as Error).message}\n`);
        return;
      }
      const headers: http.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(req.headers)) if (!HOP_HEADERS.has(k) && v !== undefined) headers[k] = v;
      headers.host = target.host;
      const upstream = http.request(
        { host: address, port: Number(target.port || 80), method: req.method, path: `${target.pathname}${target.search}`, headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      upstream.on('error', (err) => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`${err.message}\n`);
        else res.destroy();
      });
      req.pipe(upstream);
    })();
  });

  server.on('connection', (s) => track(s));
  server.on('connect', (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
    track(client);
    client.on('error', () => client.destroy());
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(req.url ?? '');
    if (!m) {
      client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const [, host, port] = m as unknown as [string, string, string];
    void (async () => {
      let address: string;
      try {
        address = (await policy.lookupChecked(host))[0]!.address;
      } catch (err) {
        refusals.push(`${host}:${port}: ${(err as Error).message}`);
        client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\nrefused: ${(err as Error).message}\n`);
        return;
      }
      const upstream = track(net.connect({ host: address, port: Number(port) }));
      let connected = false;
      upstream.once('connect', () => {
        connected = true;
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length) upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      upstream.on('error', (err) => {
        if (!connected) client.end(`HTTP/1.1 502 Bad Gateway\r\n\r\n${err.message}\n`);
        else client.destroy();
      });
      client.on('close', () => upstream.destroy());
    })();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    refusals,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
