import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

/**
 * Starts a test stand-in's server on a free loopback port and keeps its open connections, so that
 * `close()` also ends requests the stand-in was told to leave hanging (and keep-alive sockets).
 */
export async function listenOnLoopback(server: HttpServer | HttpsServer): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Duplex>();
  server.on('connection', (s: Duplex) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
