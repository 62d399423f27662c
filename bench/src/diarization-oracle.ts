// Where a diarization's count errors come from, for the bench (diarization.ts) and the
// cross-validation (diarization-cv.ts): each reference speaker's speech, and the BIC stage's
// verdict on every pair of true speakers from their own frames, as if the clustering were perfect.
import { framesDeltaBic } from '../../worker/dist/diarization/bic.js';
import { DEFAULT_PARAMS } from '../../worker/dist/diarization/default-engine.js';
import { mfcc } from '../../worker/dist/diarization/features.js';
import type { Recording } from './diarization-corpus.js';

/** Seconds of speech of each reference speaker. */
export function speechBySpeaker(rec: Recording): Map<string, number> {
  const per = new Map<string, number>();
  for (const t of rec.reference) per.set(t.speaker, (per.get(t.speaker) ?? 0) + t.end - t.start);
  return per;
}

/** The BIC stage's verdict on every pair of true speakers, from their own frames (a perfect clustering). */
export async function inseparablePairs(rec: Recording): Promise<{ pairs: number; inseparable: number }> {
  const feats = await mfcc(rec.samples);
  const frames = [...speechBySpeaker(rec).keys()].map((s) =>
    rec.reference.filter((t) => t.speaker === s).map((t) => [Math.round(t.start * 100), Math.min(feats.n, Math.round(t.end * 100))] as const),
  );
  let pairs = 0;
  let inseparable = 0;
  for (let i = 0; i < frames.length; i++) {
    for (let j = i + 1; j < frames.length; j++) {
      pairs++;
      if (
        framesDeltaBic(feats, frames[i]!, frames[j]!, {
          lambda: DEFAULT_PARAMS.bicLambda,
          maxFrames: DEFAULT_PARAMS.bicMaxFrames,
          allowance: DEFAULT_PARAMS.bicAllowance,
          allowanceFrames: DEFAULT_PARAMS.bicAllowanceFrames,
        }) < 0
      )
        inseparable++;
    }
  }
  return { pairs, inseparable };
}
