import { DIARIZATION_CONTRACT_VERSION } from '@sonar/shared';
import type { WorkerCapabilities } from './entities.js';

/**
 * The oldest contract whose claims may take any pinned job: contract 3 brought diarization (a
 * pinned job may ask for speaker labels, or be a diarization rerun, which older workers are never
 * given). Contract 4 (the completion's claim of the next job) changes nothing a pinned job needs.
 */
const PINNED_TARGET_CONTRACT_VERSION = DIARIZATION_CONTRACT_VERSION;

/** What the target rules need to know about a worker (WorkerView has it). */
export interface TargetCandidate {
  name: string;
  fresh: boolean;
  revoked: boolean;
  contractVersion: number | null;
  capabilities: (Partial<WorkerCapabilities> & { local?: boolean }) | null;
}

/**
 * Why a worker cannot take a pinned job when it next claims (such a worker cannot be chosen as a target): a
 * FRESH worker with KNOWN capabilities that speaks a contract older than PINNED_TARGET_CONTRACT_VERSION, or that
 * advertises no model at all, is incompatible. Model and diarization mismatches are not: a named
 * target is a force attempt that overrides them. Offline workers and workers that never said
 * Hello are not judged (they may be chosen in advance). Null: compatible (or unknown).
 */
export function targetIncompatibility(w: TargetCandidate): string | null {
  if (w.revoked) return 'the worker is revoked';
  if (!w.fresh || !w.capabilities) return null;
  if (w.contractVersion !== null && w.contractVersion < PINNED_TARGET_CONTRACT_VERSION) {
    return `it speaks worker contract ${w.contractVersion}; a pinned job is assigned only on a claim under contract ${PINNED_TARGET_CONTRACT_VERSION} or later`;
  }
  const models = Array.isArray(w.capabilities.models) ? w.capabilities.models : [];
  if (models.length === 0) return 'it advertises no transcription model, so it cannot claim any job';
  return null;
}

/** Differences a force attempt overrides, shown next to a compatible worker (model, diarization). */
export function targetMismatches(w: TargetCandidate, job: { model: string; diarizationRequested: boolean }): string[] {
  if (!w.capabilities) return [];
  const out: string[] = [];
  const models = Array.isArray(w.capabilities.models) ? w.capabilities.models : [];
  if (!models.includes(job.model)) out.push(`does not advertise model ${job.model}`);
  if (job.diarizationRequested && w.capabilities.diarization !== true) out.push('has no diarizer');
  return out;
}
