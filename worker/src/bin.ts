#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { WorkerAgent, FatalAgentError, type AgentLogger } from './agent.js';
import { detectCapabilities } from './capabilities.js';
import { CoordinatorClient } from './coordinator-client.js';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

const program = new Command()
  .name('sonar-worker')
  .description('Speech worker agent: connects to a Sonar coordinator over gRPC and runs transcription jobs.')
  .version(pkg.version)
  .addOption(new Option('--coordinator <host:port>', 'coordinator gRPC address').env('COORDINATOR_GRPC_URL').default('127.0.0.1:50051'))
  .addOption(new Option('--secret <secret>', 'worker secret from `npm run cli -- worker:create NAME`').env('WORKER_SECRET'))
  .addOption(new Option('--secret-file <path>', 'read the worker secret from a file').env('WORKER_SECRET_FILE'))
  .addOption(new Option('--models-dir <path>', 'folder with whisper.cpp ggml model files').env('WHISPER_MODELS_DIR'))
  .addOption(new Option('--device <name>', 'compute device to advertise (cpu, cuda:0, ...)').env('WORKER_DEVICE').default('cpu'))
  .addOption(new Option('--no-fetch-urls', 'do not download external source URLs; ask the coordinator for media').env('WORKER_NO_FETCH_URLS'))
  .addOption(new Option('--tls', 'use TLS to reach the coordinator').env('COORDINATOR_TLS'))
  .addOption(new Option('--local', 'this is the coordinator host\'s own local runner').env('WORKER_LOCAL'))
  .parse();

const opts = program.opts<{
  coordinator: string;
  secret?: string;
  secretFile?: string;
  modelsDir?: string;
  device: string;
  fetchUrls: boolean;
  tls?: boolean;
  local?: boolean;
}>();

/** One JSON object per line, like the coordinator's pino logs. */
const log = (level: string): ((obj: object, msg: string) => void) => (obj, msg) =>
  process.stderr.write(JSON.stringify({ level, time: new Date().toISOString(), msg, ...obj }) + '\n');
const logger: AgentLogger = { info: log('info'), warn: log('warn'), error: log('error') };

async function main() {
  const secret = (opts.secretFile ? readFileSync(opts.secretFile, 'utf8') : (opts.secret ?? '')).trim();
  if (!secret) {
    logger.error({}, 'no worker secret: pass --secret, --secret-file, or set WORKER_SECRET');
    process.exit(78);
  }
  const capabilities = await detectCapabilities({ modelsDir: opts.modelsDir, canFetchUrls: opts.fetchUrls, device: opts.device });
  const client = new CoordinatorClient(opts.coordinator, secret, { tls: opts.tls === true });
  const agent = new WorkerAgent({ client, capabilities, agentVersion: pkg.version, local: opts.local === true, logger });

  const shutdown = (signal: string) => {
    logger.info({ signal }, 'stopping');
    agent.stop();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  try {
    await agent.run();
  } catch (err) {
    if (err instanceof FatalAgentError) {
      logger.error({}, err.message);
      client.close();
      process.exit(err.exitCode);
    }
    throw err;
  }
  client.close();
  logger.info({}, 'stopped');
}

main().catch((err) => {
  logger.error({ err: String(err) }, 'worker crashed');
  process.exit(1);
});
