const SHUTDOWN_SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/**
 * Graceful shutdown of a long-running command (the coordinator, the quick start): `stop` runs once,
 * on the first SIGINT or SIGTERM; signals that arrive while it runs are ignored (the handlers stay,
 * so they do not kill the process half-way). `stop` ends the process itself.
 */
export function onShutdownSignal(stop: (signal: NodeJS.Signals) => void | Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    void stop(signal);
  };
  for (const s of SHUTDOWN_SIGNALS) process.on(s, handler);
}
