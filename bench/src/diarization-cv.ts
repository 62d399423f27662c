// `npm run bench:diarization:cv`: cross-validation of the default diarizer INSIDE the tuning half
// (even LibriSpeech ids; the reporting half is never read here), for choosing its settings
// without touching the reporting half (docs/diarization.md, "How the settings were chosen").
//
// The tuning voices are split in two groups (by the parity of id / 2). For each group, the speaker
// space is fitted on conversations of the OTHER group's voices, and the full default pipeline is
// scored on the group's own single utterances and conversations. So every score is on voices the
// space never saw, as on the reporting half; the settings themselves are the ones being compared.
//
// Environment:
// - DIARIZATION_CV_PARAMS: a JSON array of DefaultParams overrides, one row each (default: [{}],
//   the shipped settings).
// - DIARIZATION_CV_STRESS=1: the short-speaker set. 35 % of the voices (seeded) keep only 1.5–5 s
//   of their speech, so most conversations hold a speaker who says a sentence or two, the case
//   the reporting half's count errors come from.
// - DIARIZATION_CV_CONVERSATIONS: conversations per group (60).
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PARAMS, DefaultDiarizer, type DefaultParams } from '../../worker/dist/diarization/default-engine.js';
import { loadSileroVad } from '../../worker/dist/diarization/index.js';
import { scoreDiarization, type DerResult } from './der.js';
import { conversations, loadUtterances, singles, type Utterance } from './diarization-corpus.js';
import { inseparablePairs, speechBySpeaker } from './diarization-oracle.js';
import { fitSpaceOn } from './diarization-space.js';
import { log, rng } from './lib.js';

const CONVERSATIONS = Number(process.env.DIARIZATION_CV_CONVERSATIONS) || 60;
const STRESS = process.env.DIARIZATION_CV_STRESS === '1';
const configs = JSON.parse(process.env.DIARIZATION_CV_PARAMS || '[{}]') as Array<Partial<DefaultParams>>;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const data = path.resolve(process.env.DIARIZATION_DATA || path.join(root, '..', 'shared', 'data', 'diarization'));
const all = await loadUtterances(path.join(data, 'librispeech-train-clean-100'), path.join(os.tmpdir(), 'sonar-librispeech-f32'));
const tuning = all.filter((u) => u.half === 'tune');
const groupOf = (u: Utterance) => (Math.floor(Number(u.speaker) / 2) % 2 === 0 ? 'A' : 'B');

/** The short-speaker set: a seeded 35 % of the voices cut to 1.5–5 s of speech (as recorded otherwise). */
function shortened(voices: Utterance[], seed: number): Utterance[] {
  const random = rng(seed);
  return voices.map((u) => {
    if (random() >= 0.35) return u;
    const speechEnd = Math.min(u.speechEnd, u.speechStart + Math.round((1.5 + random() * 3.5) * 16000));
    return { ...u, samples: u.samples.subarray(0, Math.min(u.samples.length, speechEnd + 4800)), speechEnd };
  });
}

// VAD probabilities are the same for every setting compared: computed once per recording.
const vad = await loadSileroVad();
const vadOnce = vad.probabilities.bind(vad);
const probabilities = new Map<Float32Array, Float32Array>();
vad.probabilities = async (samples, opts) => probabilities.get(samples) ?? probabilities.set(samples, await vadOnce(samples, opts)).get(samples)!;

const groups = [];
for (const group of ['A', 'B'] as const) {
  const others = tuning.filter((u) => groupOf(u) !== group);
  const { space } = await fitSpaceOn(new DefaultDiarizer(vad), conversations(others, 'tune', 160, 7), 2, 14);
  let voices = tuning.filter((u) => groupOf(u) === group);
  if (STRESS) voices = shortened(voices, group === 'A' ? 5 : 6);
  groups.push({ group, space, recordings: [...singles(voices, 'tune'), ...conversations(voices, 'tune', CONVERSATIONS, 99)] });
  log(`diarization cv: group ${group}: space fitted on ${others.length} other voices; ${voices.length} voices scored`);
}

// Oracle: the BIC stage's verdict on the true speakers' own frames (a perfect clustering).
let pairs = 0;
let inseparable = 0;
for (const { recordings } of groups) {
  for (const rec of recordings.filter((r) => r.speakers > 1)) {
    const found = await inseparablePairs(rec);
    pairs += found.pairs;
    inseparable += found.inseparable;
  }
}
console.log(
  `${STRESS ? 'short-speaker set' : 'tuning voices as recorded'}: ${inseparable}/${pairs} pairs of true speakers would be merged by the BIC stage from a perfect clustering`,
);

for (const over of configs) {
  const params = { ...DEFAULT_PARAMS, ...over };
  const t = { singles: 0, singlesRight: 0, conversations: 0, right: 0, under: 0, over: 0, short: 0, shortRight: 0 };
  const scores: DerResult[] = [];
  const found = new Map<number, number[]>();
  for (const { space, recordings } of groups) {
    const diarizer = new DefaultDiarizer(vad, params, space);
    for (const rec of recordings) {
      const out = await diarizer.diarize(rec.samples, 16000);
      if (rec.speakers === 1) {
        t.singles++;
        if (out.speakerCount === 1) t.singlesRight++;
        continue;
      }
      t.conversations++;
      const right = out.speakerCount === rec.speakers;
      if (right) t.right++;
      else if (out.speakerCount < rec.speakers) t.under++;
      else t.over++;
      if (Math.min(...speechBySpeaker(rec).values()) < 4) {
        t.short++;
        if (right) t.shortRight++;
      }
      found.set(rec.speakers, [...(found.get(rec.speakers) ?? []), out.speakerCount]);
      scores.push(
        scoreDiarization(
          rec.reference,
          out.turns.map((turn) => ({ ...turn, speaker: String(turn.speaker) })),
          { collar: 0.25 },
        ),
      );
    }
  }
  const total = scores.reduce((s, r) => s + r.total, 0);
  const errors = scores.reduce((s, r) => s + r.missed + r.falseAlarm + r.confusion, 0);
  console.log(
    `${JSON.stringify(over)}: singles ${t.singlesRight}/${t.singles}; counts ${t.right}/${t.conversations} (under ${t.under}, over ${t.over}; ` +
      `with a speaker under 4 s ${t.shortRight}/${t.short}, the others ${t.right - t.shortRight}/${t.conversations - t.short}); ` +
      `pooled DER ${((100 * errors) / total).toFixed(1)} %; found per true count ${[...found].map(([k, v]) => `${k} → ${v.join('')}`).join(', ')}`,
  );
}
await vad.close();
