import { PocketsphinxEngine, type PocketsphinxOptions } from './pocketsphinx.js';
import type { TranscriptionEngine } from './types.js';
import { WhisperCppEngine, type WhisperCppOptions } from './whisper-cpp.js';

export * from './types.js';
export { POCKETSPHINX_MODEL, type PocketsphinxOptions } from './pocketsphinx.js';
export { type WhisperCppOptions } from './whisper-cpp.js';
export { decodeToWav } from '../media/decode.js';

/** Every engine this worker knows, configured; ask each for `models()` to see what really runs here. */
export function createEngines(
  opts: { modelsDir?: string | undefined; whisper?: WhisperCppOptions; pocketsphinx?: PocketsphinxOptions } = {},
): TranscriptionEngine[] {
  return [new WhisperCppEngine({ ...(opts.modelsDir ? { modelsDir: opts.modelsDir } : {}), ...opts.whisper }), new PocketsphinxEngine(opts.pocketsphinx)];
}

/** The engine that can run `model` on this host, or null. */
export function engineForModel(engines: TranscriptionEngine[], model: string): TranscriptionEngine | null {
  return engines.find((e) => e.models().includes(model)) ?? null;
}
