import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { SPEECH_MODELS, type CapabilitiesMsg } from '@sonar/shared';

const run = promisify(execFile);

/** ggml weight files whisper.cpp loads for each model name the product offers. */
export const WHISPER_MODEL_FILES: Record<(typeof SPEECH_MODELS)[number], string[]> = {
  small: ['ggml-small.bin', 'ggml-small.en.bin'],
  large: ['ggml-large-v3.bin', 'ggml-large-v2.bin', 'ggml-large.bin'],
  turbo: ['ggml-large-v3-turbo.bin'],
};

async function onPath(binary: string): Promise<boolean> {
  try {
    await run('sh', ['-c', `command -v ${binary}`]);
    return true;
  } catch {
    return false;
  }
}

/**
 * What this host can really do: only models whose weight files exist are advertised, so the
 * coordinator never hands this worker a job it cannot run.
 */
export async function detectCapabilities(opts: { modelsDir?: string | undefined; canFetchUrls: boolean; device: string }): Promise<CapabilitiesMsg> {
  const models: string[] = [];
  const engines: string[] = [];
  if (opts.modelsDir) {
    const files = new Set(await readdir(path.resolve(opts.modelsDir)).catch(() => [] as string[]));
    for (const model of SPEECH_MODELS) {
      if (WHISPER_MODEL_FILES[model].some((f) => files.has(f))) models.push(model);
    }
    if (models.length) engines.push('whisper.cpp');
  }
  if (await onPath('pocketsphinx')) engines.push('pocketsphinx');
  return { models, engines, diarization: false, can_fetch_urls: opts.canFetchUrls, device: opts.device };
}
