import { describe, expect, it } from 'vitest';
import { ModelCatalogSnapshot, type CatalogGroup } from '../src/speech/jobs/model-catalog.js';

/** A queued job with a stated speaker count says why it waits while only workers older than contract 5 are connected. */

const group = (speakerCounts: boolean, presentIds: number[]): CatalogGroup => ({
  local: false,
  models: ['small'],
  languages: {},
  diarization: true,
  speakerCounts,
  presentIds,
});
const job = (diarizationSpeakers: { num_speakers?: number; max_speakers?: number } | null) => ({
  status: 'queued',
  model: 'small',
  executionTarget: 'auto' as const,
  diarizationRequested: true,
  diarizationSpeakers,
});

describe('ModelCatalogSnapshot.explain and stated speaker counts', () => {
  it('only workers below contract 5 connected: a counted job waits and says why; a job without a count does not', () => {
    const old = new ModelCatalogSnapshot([group(false, [1]), group(true, [])]);
    expect(old.explain(job({ num_speakers: 3 }))).toMatch(/can honour a stated speaker count .*contract 5/);
    expect(old.explain(job(null))).toBeNull();
  });

  it('a connected worker of contract 5 takes it', () => {
    const current = new ModelCatalogSnapshot([group(false, [1]), group(true, [2])]);
    expect(current.explain(job({ max_speakers: 2 }))).toBeNull();
  });

  it('a job pinned to a connected worker below contract 5 says it cannot honour the count', () => {
    const snapshot = new ModelCatalogSnapshot([group(false, [1]), group(true, [2])]);
    const pinned = (id: number) => ({ ...job({ num_speakers: 2 }), executionTarget: 'worker' as const, targetWorker: { id, name: `w${id}` } });
    expect(snapshot.explain(pinned(1))).toMatch(/pinned worker "w1" speaks a worker contract older than 5/);
    expect(snapshot.explain(pinned(2))).toBeNull();
    expect(snapshot.explain({ ...pinned(1), diarizationSpeakers: null })).toBeNull();
  });
});
