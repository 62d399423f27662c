// Fitting the default diarizer's speaker space on generated conversations: the windows that tile
// each reference turn (one voice each), as the diarizer normalises and averages them. Used by
// `npm run bench:diarization:calibrate` (the shipped space, fitted on the whole tuning half) and
// `npm run bench:diarization:cv` (a space per cross-validation group).
import type { DefaultDiarizer } from '../../worker/dist/diarization/default-engine.js';
import { fitSpeakerSpace, type LabelledWindows, type SpeakerSpace } from '../../worker/dist/diarization/speaker-space.js';
import type { Recording } from './diarization-corpus.js';

export interface FittedSpace {
  space: SpeakerSpace;
  windows: number;
}

export async function fitSpaceOn(diarizer: DefaultDiarizer, recordings: Recording[], window: number, dims: number): Promise<FittedSpace> {
  const labelled: LabelledWindows[] = [];
  let inputs = 0;
  for (const conv of recordings) {
    const windows: { start: number; end: number }[] = [];
    const speakers: string[] = [];
    for (const turn of conv.reference) {
      for (let t = turn.start; t + window <= turn.end; t += window) {
        windows.push({ start: t, end: t + window });
        speakers.push(turn.speaker);
      }
    }
    const v = await diarizer.windowVectors(conv.samples, windows);
    inputs = v.inputs;
    labelled.push({ x: v.x, speakers });
  }
  return { space: fitSpeakerSpace(labelled, inputs, dims), windows: labelled.reduce((s, r) => s + r.speakers.length, 0) };
}
