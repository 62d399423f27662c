import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { SPEECH_MODELS, type CapabilitiesMsg } from '@sonar/shared';
import { findExecutable } from './engines/process.js';
import type { TranscriptionEngine } from './engines/types.js';
import { WHISPER_MODEL_FILES } from './engines/whisper-cpp.js';

/** ggml weight files whisper.cpp loads for each model name the product offers. */
export { WHISPER_MODEL_FILES };

/**
 * What this host can really do, so the coordinator never hands this worker a job it cannot run.
 *
 * With `engines` (e.g. `createEngines({ modelsDir })` from ./engines/index.js), the models are
 * exactly what those engines report from `models()`: whisper.cpp's small/large/turbo only when
 * whisper-cli is built and the ggml file exists, `pocketsphinx-en-us` only when the pocketsphinx CLI
 * and Debian's en-us model are installed; `engines` lists the engines with at least one model, and
 * `model_languages` the languages of models limited to some (pocketsphinx-en-us: en).
 *
 * Without `engines` (what the agent passes today), only whisper model files in `modelsDir` are
 * looked at, as before, and no pocketsphinx model is advertised.
 */
export async function detectCapabilities(opts: {
  modelsDir?: string | undefined;
  canFetchUrls: boolean;
  device: string;
  engines?: TranscriptionEngine[] | undefined;
  /** The diarizer this worker loaded (its engine name), or why the configured one cannot run. */
  diarization?: { engine: string } | { error: string } | undefined;
}): Promise<CapabilitiesMsg> {
  const models: string[] = [];
  const engines: string[] = [];
  const modelLanguages: Array<{ model: string; languages: string[] }> = [];
  if (opts.engines) {
    for (const engine of opts.engines) {
      const available = engine.models();
      if (!available.length) continue;
      engines.push(engine.name);
      for (const m of available) {
        if (models.includes(m)) continue;
        models.push(m);
        const languages = engine.languages?.(m) ?? [];
        if (languages.length) modelLanguages.push({ model: m, languages });
      }
    }
  } else {
    if (opts.modelsDir) {
      const files = new Set(await readdir(path.resolve(opts.modelsDir)).catch(() => [] as string[]));
      for (const model of SPEECH_MODELS) {
        if (WHISPER_MODEL_FILES[model].some((f) => files.has(f))) models.push(model);
      }
      if (models.length) engines.push('whisper.cpp');
    }
    if (findExecutable('pocketsphinx') || findExecutable('pocketsphinx_continuous')) engines.push('pocketsphinx');
  }
  const d = opts.diarization;
  return {
    models,
    engines,
    diarization: d !== undefined && 'engine' in d,
    diarization_engine: d && 'engine' in d ? d.engine : '',
    diarization_error: d && 'error' in d ? d.error : '',
    can_fetch_urls: opts.canFetchUrls,
    device: opts.device,
    model_languages: modelLanguages,
  };
}
