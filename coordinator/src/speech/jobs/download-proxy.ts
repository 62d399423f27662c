import { lookup } from 'node:dns/promises';
import net, { isIP } from 'node:net';

/**
 * The download proxy could not be resolved or reached (URL jobs go through the
 * configured proxy first): the same download
 * is retried directly unless strict proxy mode is on. A proxy that answers, even with an error
 * about the target, is reached; its answer is the download's result.
 */
export class ProxyUnreachable extends Error {
  constructor(readonly reason: string) {
    super(`the download proxy could not be reached (${reason})`);
    this.name = 'ProxyUnreachable';
  }
}

const CONNECT_ERRORS: Record<string, string> = {
  ENOTFOUND: 'its host name does not resolve',
  EAI_AGAIN: 'its host name could not be resolved (temporary DNS failure)',
  EAI_FAIL: 'its host name could not be resolved',
  ECONNREFUSED: 'connection refused',
  ETIMEDOUT: 'timed out connecting',
  UND_ERR_CONNECT_TIMEOUT: 'timed out connecting',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EHOSTDOWN: 'host down',
};

/** Resolves the proxy's host and opens (and closes) one TCP connection to it. */
export async function ensureProxyReachable(proxy: string, timeoutMs = 10_000): Promise<void> {
  const url = new URL(proxy);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  let address = host;
  if (!isIP(host)) {
    try {
      address = (await lookup(host)).address;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      throw new ProxyUnreachable(CONNECT_ERRORS[code] ?? `its host name does not resolve (${code || (err as Error).message})`);
    }
  }
  await new Promise<void>((resolve, reject) => {
    const socket = net.connect({ host: address, port });
    const fail = (reason: string) => {
      socket.destroy();
      reject(new ProxyUnreachable(reason));
    };
    socket.setTimeout(timeoutMs, () => fail('timed out connecting'));
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', (err: NodeJS.ErrnoException) => fail(CONNECT_ERRORS[err.code ?? ''] ?? err.message));
  });
}

/**
 * A fetch through undici's ProxyAgent that failed before the proxy answered: every target is
 * reached through a CONNECT tunnel, so a socket-level connect error is the proxy's. Null otherwise.
 */
export function proxyConnectFailure(err: unknown): ProxyUnreachable | null {
  for (let e = err as { code?: string; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    const reason = e.code ? CONNECT_ERRORS[e.code] : undefined;
    if (reason) return new ProxyUnreachable(reason);
  }
  return null;
}
