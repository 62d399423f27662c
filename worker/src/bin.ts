#!/usr/bin/env node
import { fstatSync, readFileSync } from 'node:fs';
import { OutboundPolicy } from '@sonar/shared';
import { WorkerAgent, FatalAgentError, type AgentLogger } from './agent.js';
import { detectCapabilities } from './capabilities.js';
import { CoordinatorClient } from './coordinator-client.js';
import { createEngines, decodeToWav, engineForModel, type TranscriptionEngine } from './engines/index.js';
import { DiarizerUnavailableError, createDiarizer, readWav, type DiarizerConfig } from './diarization/index.js';
import { runJob, type JobDiarizer } from './job-runner.js';
import { handleUncaught } from './fault-guard.js';
import { defaultWorkDir, formatDoctorTable, runDoctor } from './doctor.js';
import { workerCommand } from './options.js';
import { workerVersion } from './package-root.js';

/** The parent as early as this module can see it: main() awaits capability detection before it watches. */
const parentAtStart = process.ppid;

const pkg = { version: workerVersion() };

const program = workerCommand(pkg.version).parse();

const opts = program.opts<{
  coordinator: string;
  secret?: string;
  secretFile?: string;
  modelsDir?: string;
  device: string;
  fetchUrls: boolean;
  outboundAllowRanges?: string;
  tls?: boolean;
  local?: boolean;
  workDir?: string;
  shutdownGraceMs: string;
  presenceOnly?: boolean;
  exitWithParent?: boolean;
  diarization: 'default' | 'sherpa-onnx' | 'off';
  diarizationSegmentationModel?: string;
  diarizationEmbeddingModel?: string;
}>();

/** The diarizer the options ask for; null with --diarization off. */
function diarizerConfig(): DiarizerConfig | null {
  if (opts.diarization === 'off') return null;
  return opts.diarization === 'sherpa-onnx'
    ? { engine: 'sherpa-onnx', segmentationModel: opts.diarizationSegmentationModel ?? '', embeddingModel: opts.diarizationEmbeddingModel ?? '' }
    : { engine: 'default' };
}

/**
 * Loads the configured diarizer. A diarizer that cannot run (missing or broken model files, a
 * native package that does not load) is not fatal: the worker still transcribes, advertises no
 * diarization and tells the coordinator why (Capabilities.diarization_error).
 */
async function loadDiarizer(): Promise<{ diarizer: JobDiarizer; engine: string } | { error: string } | undefined> {
  const config = diarizerConfig();
  if (!config) return undefined;
  try {
    const engine = await createDiarizer(config);
    const diarizer: JobDiarizer = {
      name: engine.name,
      async diarize(wavPath, signal, speakers) {
        const { samples, sampleRate } = await readWav(wavPath);
        return engine.diarize(samples, sampleRate, { signal, ...speakers });
      },
    };
    return { diarizer, engine: engine.name };
  } catch (err) {
    const error = err instanceof DiarizerUnavailableError ? err.message : `diarizer failed to load: ${String(err)}`;
    logger.warn({ engine: opts.diarization, error }, 'speaker diarization unavailable');
    return { error };
  }
}

/** The engine for a job's model; a pinned (forced) job runs on whatever this worker has. */
function pickEngine(engines: TranscriptionEngine[], model: string, forced: boolean) {
  const exact = engineForModel(engines, model);
  if (exact) return { engine: exact, model };
  if (!forced) return null;
  for (const engine of engines) {
    const first = engine.models()[0];
    if (first) return { engine, model: first };
  }
  return null;
}

/** One JSON object per line, like the coordinator's pino logs. */
const log =
  (level: string): ((obj: object, msg: string) => void) =>
  (obj, msg) =>
    process.stderr.write(JSON.stringify({ level, time: new Date().toISOString(), msg, ...obj }) + '\n');
const logger: AgentLogger = { info: log('info'), warn: log('warn'), error: log('error') };

/** `sonar-worker doctor`: the checks as a table on stdout; exit code 1 when one failed. */
async function doctor(secret: string): Promise<never> {
  const lines = await runDoctor({
    coordinator: opts.coordinator,
    secret,
    tls: opts.tls === true,
    agentVersion: pkg.version,
    device: opts.device,
    engines: createEngines({ modelsDir: opts.modelsDir }),
    diarization: diarizerConfig(),
    workDir: opts.workDir ?? defaultWorkDir(),
  });
  process.stdout.write(formatDoctorTable(lines));
  process.exit(lines.some((l) => l.verdict === 'FAIL') ? 1 : 0);
}

async function main() {
  const secret = (opts.secretFile ? readFileSync(opts.secretFile, 'utf8') : (opts.secret ?? '')).trim();
  if (program.args[0] === 'doctor') await doctor(secret);
  if (!secret) {
    logger.error({}, 'no worker secret: pass --secret, --secret-file, or set WORKER_SECRET');
    process.exit(78);
  }
  let outbound: OutboundPolicy;
  try {
    outbound = new OutboundPolicy(
      (opts.outboundAllowRanges ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );
  } catch (err) {
    logger.error({}, `--outbound-allow-ranges / SONAR_OUTBOUND_ALLOW_RANGES: ${(err as Error).message}`);
    process.exit(78);
  }
  const engines = createEngines({ modelsDir: opts.modelsDir });
  const diarization = await loadDiarizer();
  const capabilities = await detectCapabilities({
    modelsDir: opts.modelsDir,
    canFetchUrls: opts.fetchUrls,
    device: opts.device,
    engines,
    diarization: diarization && 'engine' in diarization ? { engine: diarization.engine } : diarization,
  });
  const client = new CoordinatorClient(opts.coordinator, secret, { tls: opts.tls === true });
  const agent = new WorkerAgent({
    client,
    capabilities,
    agentVersion: pkg.version,
    local: opts.local === true,
    logger,
    shutdownGraceMs: Number(opts.shutdownGraceMs),
    ...(opts.presenceOnly
      ? {}
      : {
          runJob: (job, stop, next) =>
            runJob(
              {
                client,
                pickEngine: (model, forced) => pickEngine(engines, model, forced),
                decode: (input, output, signal) => decodeToWav(input, output, { signal }),
                outbound,
                ...(opts.workDir ? { workDir: opts.workDir } : {}),
                log: (level, obj, msg) => logger[level](obj, msg),
                ...(diarization && 'diarizer' in diarization
                  ? { diarizer: diarization.diarizer }
                  : { diarizerUnavailable: diarization?.error ?? 'speaker diarization is turned off on this worker (--diarization off)' }),
              },
              job,
              stop,
              next,
            ),
        }),
  });

  const shutdown = (signal: string) => {
    logger.info({ signal }, 'stopping');
    agent.stop();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // A fault of the HTTP client fails its downloads, not the worker (fault-guard.ts).
  process.on('uncaughtException', (err) => handleUncaught(err, logger));
  if (opts.exitWithParent) exitWithParent(agent);

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
  await outbound.close();
  logger.info({}, 'stopped');
}

/**
 * Stops the agent when the parent is gone (even SIGKILLed): its coordinator went with it, so the
 * running job is handed back without grace (its engine processes are killed) and the agent stops;
 * a hard exit bounds the wait for calls to the vanished coordinator. Two signs, either suffices:
 *
 * - stdin is a pipe whose write end only the parent holds (the quick start spawns this agent so):
 *   the kernel closes it when the parent exits, and the end of input is seen whenever this process
 *   starts reading, even when the parent died while this one was still loading.
 * - the parent PID changes (the kernel hands an orphan to init or a subreaper). It is compared with
 *   the parent this process had when it started, not when it got here: capability detection comes
 *   first and takes a while, and a parent that died meanwhile must not become the "parent" watched.
 */
function exitWithParent(agent: WorkerAgent) {
  let gone = false;
  const stop = (why: string) => {
    if (gone) return;
    gone = true;
    clearInterval(timer);
    logger.warn({ parent: parentAtStart, why }, 'parent process exited; stopping');
    agent.stop(0);
    setTimeout(() => process.exit(1), 10_000).unref();
  };
  const timer = setInterval(() => {
    if (process.ppid !== parentAtStart) stop(`parent PID changed to ${process.ppid}`);
  }, 500);
  timer.unref();
  if (process.ppid !== parentAtStart) stop(`parent PID changed to ${process.ppid}`);

  if (stdinIsPipe()) {
    const stdin = process.stdin;
    stdin.on('data', () => undefined); // nothing is sent; only the end matters
    stdin.once('end', () => stop('stdin from the parent closed'));
    stdin.once('error', () => stop('stdin from the parent failed'));
    // Reading must not keep this process alive once the agent has stopped for another reason.
    (stdin as { unref?: () => void }).unref?.();
  }
}

/** A pipe or socket: what a parent hands over as a lifeline. A terminal or /dev/null is not one. */
function stdinIsPipe(): boolean {
  try {
    const st = fstatSync(0);
    return st.isFIFO() || st.isSocket();
  } catch {
    return false;
  }
}

main().catch((err: unknown) => {
  logger.error({ err: String(err) }, 'worker crashed');
  process.exit(1);
});
