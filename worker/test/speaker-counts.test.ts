import { describe, expect, it } from 'vitest';
import { SherpaDiarizer, type SherpaDiarization } from '../src/diarization/sherpa.js';
import { speakerBounds } from '../src/job-runner.js';

/**
 * Stated speaker counts on the worker: the claim's num_speakers / min_speakers / max_speakers (0: not
 * stated) as the engines' bounds, and how the sherpa-onnx engine honours them (an exact count is its
 * numClusters; bounds: a run with the threshold, then one at the nearest bound when the count is outside).
 */

const stated = (num_speakers: number, min_speakers: number, max_speakers: number) => ({ num_speakers, min_speakers, max_speakers });

describe('speakerBounds', () => {
  it('reads an exact count as both bounds, bounds as they are, and 0 as not stated', () => {
    expect(speakerBounds(stated(0, 0, 0))).toEqual({});
    expect(speakerBounds(stated(3, 0, 0))).toEqual({ minSpeakers: 3, maxSpeakers: 3 });
    expect(speakerBounds(stated(0, 2, 0))).toEqual({ minSpeakers: 2 });
    expect(speakerBounds(stated(0, 0, 2))).toEqual({ maxSpeakers: 2 });
    expect(speakerBounds(stated(0, 2, 4))).toEqual({ minSpeakers: 2, maxSpeakers: 4 });
    // What a coordinator never sends: num wins over bounds; crossed bounds collapse to the maximum.
    expect(speakerBounds(stated(3, 1, 2))).toEqual({ minSpeakers: 3, maxSpeakers: 3 });
    expect(speakerBounds(stated(0, 5, 2))).toEqual({ minSpeakers: 2, maxSpeakers: 2 });
  });
});

/** A stand-in for sherpa-onnx: with the threshold (numClusters -1) it finds `natural` speakers, else numClusters. */
function fakeSherpa(natural: number) {
  const runs: number[] = [];
  let clusters = -1;
  const engine: SherpaDiarization = {
    sampleRate: 16000,
    setConfig(config) {
      clusters = config.clustering?.numClusters ?? -1;
    },
    process() {
      runs.push(clusters);
      const count = clusters > 0 ? clusters : natural;
      return Array.from({ length: count * 2 }, (_, i) => ({ start: i, end: i + 0.9, speaker: i % count }));
    },
  };
  return { diarizer: new SherpaDiarizer(engine), runs };
}

describe('the sherpa-onnx engine with a stated count', () => {
  const audio = new Float32Array(16000);

  it('an exact count is numClusters, in one run', async () => {
    const { diarizer, runs } = fakeSherpa(5);
    expect((await diarizer.diarize(audio, 16000, { minSpeakers: 3, maxSpeakers: 3 })).speakerCount).toBe(3);
    expect(runs).toEqual([3]);
  });

  it('bounds: the threshold first; outside the bounds, again at the nearest bound', async () => {
    const within = fakeSherpa(3);
    expect((await within.diarizer.diarize(audio, 16000, { minSpeakers: 2, maxSpeakers: 4 })).speakerCount).toBe(3);
    expect(within.runs).toEqual([-1]);
    const tooMany = fakeSherpa(5);
    expect((await tooMany.diarizer.diarize(audio, 16000, { maxSpeakers: 2 })).speakerCount).toBe(2);
    expect(tooMany.runs).toEqual([-1, 2]);
    const tooFew = fakeSherpa(1);
    expect((await tooFew.diarizer.diarize(audio, 16000, { minSpeakers: 3 })).speakerCount).toBe(3);
    expect(tooFew.runs).toEqual([-1, 3]);
    const none = fakeSherpa(4);
    expect((await none.diarizer.diarize(audio, 16000)).speakerCount).toBe(4);
    expect(none.runs).toEqual([-1]);
  });
});
