import { abortDownloads } from './job-runner.js';
import type { AgentLogger } from './agent.js';

/**
 * Whether an error that reached no caller was thrown inside undici, the HTTP client of source
 * downloads (its stack runs through the package). Such a fault belongs to one connection, not to
 * the worker: undici 6 threw `assert(!this.paused)` from its HTTP/1 parser when a server closed the
 * connection after the body while the file write held the stream back (fixed in undici 8; this
 * guard stays for the next one).
 */
export function isHttpClientFault(err: unknown): boolean {
  return err instanceof Error && /[\\/]node_modules[\\/]undici[\\/]/.test(err.stack ?? '');
}

/**
 * The agent's answer to an uncaught exception: an HTTP client fault fails the downloads in flight
 * (their attempts end with "Could not download the source", the job is retried or failed by the
 * coordinator as usual) and the worker goes on serving; anything else is logged and ends the
 * process with status 1, as Node would.
 */
export function handleUncaught(err: unknown, logger: AgentLogger, exit: (code: number) => void = (code) => process.exit(code)): 'contained' | 'fatal' {
  if (isHttpClientFault(err)) {
    const downloads = abortDownloads(err as Error);
    logger.error(
      { err: (err as Error).message, downloads },
      'the HTTP client failed outside any request; the downloads in flight fail their attempts and the worker goes on',
    );
    return 'contained';
  }
  logger.error({ err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, 'uncaught error: the worker stops');
  exit(1);
  return 'fatal';
}
