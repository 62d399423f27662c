#!/usr/bin/env node
import { ConfigError, loadConfig } from './config.js';
import { onShutdownSignal } from './infra/shutdown.js';
import { startCoordinator } from './service.js';

/** Production entry point: configuration from the environment, graceful shutdown on signals. */
async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  const svc = await startCoordinator(config);
  svc.logger.info({ url: svc.url, grpcPort: svc.grpcPort }, 'coordinator ready');

  onShutdownSignal((signal) => {
    svc.logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      svc.logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, 30_000);
    force.unref();
    svc.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}

main().catch((err: unknown) => {
  // A bad file named by the configuration (the IRC logger's) is a configuration error too.
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(78);
  }
  console.error(err);
  process.exit(1);
});
