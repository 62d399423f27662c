// `sonar-worker doctor`: what this host can serve and whether the coordinator takes this worker,
// as one table with a verdict per line. It starts nothing that stays: the coordinator is asked with
// a probe Hello (HelloRequest.probe), which registers no session and ends no lease, so it is safe
// next to a running agent with the same secret.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { WORKER_CONTRACT_VERSION } from '@sonar/shared';
import { CoordinatorClient } from './coordinator-client.js';
import { createDiarizer, DiarizerUnavailableError, type DiarizerConfig } from './diarization/index.js';
import { findExecutable } from './engines/process.js';
import type { TranscriptionEngine } from './engines/types.js';

export type Verdict = 'ok' | 'warn' | 'FAIL';

export interface DoctorLine {
  check: string;
  verdict: Verdict;
  detail: string;
}

export interface DoctorInput {
  coordinator: string;
  secret: string;
  tls: boolean;
  agentVersion: string;
  device: string;
  engines: TranscriptionEngine[];
  diarization: DiarizerConfig | null;
  /** Where jobs' media go (--work-dir; else the system's temporary folder). */
  workDir: string;
  /** How long the coordinator may take to answer. */
  timeoutMs?: number;
}

/** Free space below which a job's media may not fit (a long recording decoded to WAV is about 2 MB a minute). */
const DISK_FAIL_BYTES = 1 * 1024 ** 3;
const DISK_WARN_BYTES = 5 * 1024 ** 3;

function firstLine(cmd: string, args: string[]): string | null {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) return null;
  return r.stdout.split('\n')[0]!.trim();
}

function ffmpegLine(): DoctorLine {
  const bin = findExecutable('ffmpeg');
  if (!bin) return { check: 'ffmpeg', verdict: 'FAIL', detail: 'not on PATH; every job is decoded with it (apt-get install ffmpeg)' };
  const version = firstLine(bin, ['-hide_banner', '-version']);
  return version
    ? { check: 'ffmpeg', verdict: 'ok', detail: `${version.replace(/ Copyright.*$/, '')} (${bin})` }
    : { check: 'ffmpeg', verdict: 'FAIL', detail: `${bin} -version failed` };
}

/** The GPUs nvidia-smi lists, or why none are seen. */
function gpus(): { names: string[]; why: string } {
  const smi = findExecutable('nvidia-smi');
  if (!smi) return { names: [], why: 'nvidia-smi is not on PATH' };
  const r = spawnSync(smi, ['-L'], { encoding: 'utf8', timeout: 15_000 });
  if (r.status !== 0) return { names: [], why: `nvidia-smi -L failed${r.stderr ? ` (${r.stderr.trim().split('\n')[0]})` : ''}` };
  const names = r.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /^GPU \d+/.test(l));
  if (!names.length) return { names: [], why: 'nvidia-smi -L lists no GPU' };
  return { names, why: '' };
}

/** Whether a whisper-cli binary links ggml's CUDA backend (ldd names libggml-cuda or the CUDA runtime). */
function whisperUsesCuda(binary: string): boolean | null {
  const r = spawnSync('ldd', [binary], { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) return null;
  return /ggml-cuda|libcudart|libcublas/.test(r.stdout);
}

function engineLines(engines: TranscriptionEngine[]): DoctorLine[] {
  return engines.map((engine) => {
    const models = engine.models();
    const check = `engine ${engine.name}`;
    if (models.length) return { check, verdict: 'ok', detail: `models: ${models.join(', ')}` };
    return { check, verdict: 'warn', detail: `no model: ${whyNoModel(engine)}` };
  });
}

/** What an engine without models lacks, from what it exposes (whisper.cpp: its binary and models folder; pocketsphinx: its CLI and model). */
function whyNoModel(engine: TranscriptionEngine): string {
  const e = engine as Partial<{ binary(): string | null; modelsDir(): string | null; cli(): unknown; modelFiles(): unknown }>;
  if (e.binary && e.modelsDir) {
    if (!e.binary()) return 'whisper-cli is not built (npm run whisper:build in the installed package, or set WHISPER_CLI)';
    const dir = e.modelsDir();
    return dir
      ? `no ggml model file (ggml-small.bin, ggml-large-v3.bin, ggml-large-v3-turbo.bin, …) in ${dir}`
      : 'no models folder (--models-dir / WHISPER_MODELS_DIR)';
  }
  if (e.cli && e.modelFiles) {
    if (!e.cli()) return 'neither pocketsphinx nor pocketsphinx_continuous is on PATH (apt-get install pocketsphinx)';
    return 'the en-us model is not installed (apt-get install pocketsphinx-en-us)';
  }
  return 'the engine reports none';
}

function gpuLines(device: string, engines: TranscriptionEngine[]): DoctorLine[] {
  const seen = gpus();
  const wantsGpu = /^cuda/i.test(device);
  const lines: DoctorLine[] = [
    seen.names.length
      ? { check: 'GPU', verdict: 'ok', detail: seen.names.join('; ') }
      : { check: 'GPU', verdict: wantsGpu ? 'FAIL' : 'ok', detail: `${seen.why}${wantsGpu ? `, but --device is ${device}` : '; CPU only (--device cpu)'}` },
  ];
  const whisper = engines.find((e) => e.name === 'whisper.cpp') as Partial<{ binary(): string | null }> | undefined;
  const binary = whisper?.binary?.();
  if (binary) {
    const cuda = whisperUsesCuda(binary);
    const check = 'whisper.cpp GPU';
    if (cuda === null) lines.push({ check, verdict: 'warn', detail: `cannot tell: ldd ${binary} failed` });
    else if (cuda && seen.names.length) lines.push({ check, verdict: 'ok', detail: `CUDA build, uses the GPU (${binary})` });
    else if (cuda)
      lines.push({ check, verdict: 'FAIL', detail: `CUDA build but no GPU is visible: it cannot run here; rebuild with WHISPER_CUDA=0 (${binary})` });
    else if (seen.names.length) {
      lines.push({ check, verdict: 'warn', detail: `CPU build although a GPU is visible: WHISPER_CUDA=1 npm run whisper:build (needs nvcc) (${binary})` });
    } else lines.push({ check, verdict: 'ok', detail: `CPU build (${binary})` });
  }
  return lines;
}

async function diarizerLine(config: DiarizerConfig | null): Promise<DoctorLine> {
  if (!config) return { check: 'diarizer', verdict: 'ok', detail: 'off (--diarization off): jobs are transcribed without speakers' };
  try {
    const diarizer = await createDiarizer(config);
    return { check: 'diarizer', verdict: 'ok', detail: `${diarizer.name} loaded` };
  } catch (err) {
    const why = err instanceof DiarizerUnavailableError ? err.message : String(err);
    return { check: 'diarizer', verdict: 'warn', detail: `${why}; jobs are transcribed without speakers` };
  }
}

function diskLine(workDir: string): DoctorLine {
  const check = 'work folder';
  let free: number;
  try {
    const probe = mkdtempSync(path.join(workDir, 'sonar-doctor-'));
    rmSync(probe, { recursive: true, force: true });
    const s = statfsSync(workDir);
    free = s.bavail * s.bsize;
  } catch (err) {
    return { check, verdict: 'FAIL', detail: `${workDir} is not a writable folder (${(err as NodeJS.ErrnoException).code ?? String(err)})` };
  }
  const gib = `${(free / 1024 ** 3).toFixed(1)} GiB free in ${workDir}`;
  if (free < DISK_FAIL_BYTES) return { check, verdict: 'FAIL', detail: `${gib}: too little for a job's media` };
  if (free < DISK_WARN_BYTES) return { check, verdict: 'warn', detail: `${gib}: long recordings may not fit` };
  return { check, verdict: 'ok', detail: gib };
}

async function coordinatorLine(input: DoctorInput): Promise<DoctorLine> {
  const check = 'coordinator';
  if (!input.secret) return { check, verdict: 'FAIL', detail: 'no worker secret: pass --secret, --secret-file, or set WORKER_SECRET' };
  const client = new CoordinatorClient(input.coordinator, input.secret, { tls: input.tls });
  try {
    const res = await client.hello(
      { contract_version: WORKER_CONTRACT_VERSION, agent_version: input.agentVersion, hostname: hostname(), capabilities: null, local: false, probe: true },
      input.timeoutMs ?? 10_000,
    );
    return {
      check,
      verdict: 'ok',
      detail: `${input.coordinator} accepts the secret of worker "${res.worker_name}" (contract ${WORKER_CONTRACT_VERSION}; the coordinator speaks ${res.min_supported_contract_version}–${res.coordinator_contract_version})`,
    };
  } catch (err) {
    const e = err as grpc.ServiceError;
    if (e.code === grpc.status.UNAUTHENTICATED) return { check, verdict: 'FAIL', detail: `${input.coordinator} refused the worker secret: ${e.details}` };
    if (e.code === grpc.status.FAILED_PRECONDITION) return { check, verdict: 'FAIL', detail: `${input.coordinator} refused this agent: ${e.details}` };
    return {
      check,
      verdict: 'FAIL',
      detail: `cannot reach ${input.coordinator}${input.tls ? ' (TLS)' : ''}: ${(e.details || e.message).replace(/\s*Resolution note:\s*$/, '')}`,
    };
  } finally {
    client.close();
  }
}

/** Every check, in the order printed. */
export async function runDoctor(input: DoctorInput): Promise<DoctorLine[]> {
  const major = Number(process.versions.node.split('.')[0]);
  const lines: DoctorLine[] = [
    { check: 'node', verdict: major >= 22 ? 'ok' : 'FAIL', detail: `${process.version}${major >= 22 ? '' : ': the worker needs Node 22 or newer'}` },
    ffmpegLine(),
    ...engineLines(input.engines),
  ];
  const models = [...new Set(input.engines.flatMap((e) => e.models()))];
  lines.push(
    models.length
      ? { check: 'models', verdict: 'ok', detail: `this worker can serve ${models.join(', ')}` }
      : { check: 'models', verdict: 'FAIL', detail: 'no model can be served: the coordinator would hand this worker no job' },
  );
  lines.push(await diarizerLine(input.diarization), ...gpuLines(input.device, input.engines), diskLine(input.workDir), await coordinatorLine(input));
  return lines;
}

/** The lines as an aligned table, with the overall verdict last. */
export function formatDoctorTable(lines: DoctorLine[]): string {
  const rows = [{ check: 'CHECK', verdict: 'RESULT', detail: 'DETAIL' }, ...lines];
  const w1 = Math.max(...rows.map((r) => r.check.length));
  const w2 = Math.max(...rows.map((r) => r.verdict.length));
  const out = rows.map((r) => `${r.check.padEnd(w1)}  ${r.verdict.padEnd(w2)}  ${r.detail}`);
  const failed = lines.filter((l) => l.verdict === 'FAIL').length;
  const warned = lines.filter((l) => l.verdict === 'warn').length;
  out.push('', failed ? `FAIL: ${failed} check(s) failed, ${warned} warning(s)` : `ok: this worker can serve jobs (${warned} warning(s))`);
  return `${out.join('\n')}\n`;
}

/** The folder doctor checks for space when --work-dir is not given (the job runner's default). */
export function defaultWorkDir(): string {
  return tmpdir();
}
