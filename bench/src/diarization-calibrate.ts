// `npm run bench:diarization:calibrate`: fits the default diarizer's speaker space
// (worker/src/diarization/speaker-space.ts) on conversations built from the TUNING half of the
// LibriSpeech speakers only (even ids, bench/src/diarization-corpus.ts) and writes its numbers to
// worker/src/diarization/speaker-space-data.ts. The reporting half is never read here.
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDefaultDiarizer } from '../../worker/dist/diarization/index.js';
import { conversations, loadUtterances } from './diarization-corpus.js';
import { fitSpaceOn } from './diarization-space.js';
import { log } from './lib.js';

/** Conversations fitted on, window length (s, as the diarizer's), dimensions kept. */
const CONVERSATIONS = 160;
const WINDOW = 2;
const DIMS = 14;
const SEED = 7;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const data = path.resolve(process.env.DIARIZATION_DATA || path.join(root, '..', 'shared', 'data', 'diarization'));
const utterances = await loadUtterances(path.join(data, 'librispeech-train-clean-100'), path.join(os.tmpdir(), 'sonar-librispeech-f32'));
const diarizer = await createDefaultDiarizer();
const { space, windows } = await fitSpaceOn(diarizer, conversations(utterances, 'tune', CONVERSATIONS, SEED), WINDOW, DIMS);
await diarizer.close();
const num = (x: number) => Number(x.toPrecision(6));
const file = path.join(root, 'worker/src/diarization/speaker-space-data.ts');
writeFileSync(
  file,
  `// Written by \`npm run bench:diarization:calibrate\` from ${CONVERSATIONS} conversations of the tuning half
// (even LibriSpeech speaker ids, seed ${SEED}, ${WINDOW} s windows); do not edit by hand (see speaker-space.ts).
import type { SpeakerSpace } from './speaker-space.js';

export const SPEAKER_SPACE: SpeakerSpace = {
  inputs: ${space.inputs},
  dims: ${space.dims},
  // Between/within variance ratio of each axis.
  ratios: [${space.ratios.map(num).join(', ')}],
  // ${space.inputs} × ${space.dims}, row-major.
  projection: [${space.projection.map(num).join(', ')}],
};
`,
);
log(`speaker space: ${CONVERSATIONS} conversations, ${windows} windows; axis ratios ${space.ratios.map((r) => r.toFixed(2)).join(' ')}; written to ${file}`);
