/**
 * Version of the coordinator <-> worker gRPC contract (proto/worker.proto).
 * Bump it when a change to the protocol would make an older worker misbehave;
 * the coordinator refuses workers outside [MIN_SUPPORTED, CURRENT].
 */
export const WORKER_CONTRACT_VERSION = 5;
/** Contract 2 added HelloRequest.held_leases; a contract-1 worker's Hello never abandons leases. */
export const HELD_LEASES_CONTRACT_VERSION = 2;
/**
 * Contract 3 added diarization: JobAssignment.task ("diarize" reruns), ProgressUpdate.diarization_state
 * and CompleteRequest.diarization. Older workers are never offered diarization work and their
 * `Capabilities.diarization` is ignored (they cannot report turns).
 */
export const DIARIZATION_CONTRACT_VERSION = 3;
/**
 * Contract 4 added CompleteRequest.claim_next / session_id and CompleteResponse.next: a completion
 * that also claims the worker's next job. A worker asks for it only from a coordinator that said
 * Hello with this version or later; an older worker never asks and claims with Claim as before.
 */
export const CLAIM_NEXT_CONTRACT_VERSION = 4;
/**
 * Contract 5 added stated speaker counts: JobAssignment.num_speakers / min_speakers / max_speakers
 * (0: not stated). An older worker would ignore them and diarize with its own count, so a job (or a
 * diarization rerun) with a stated count is never handed to a worker below this version.
 */
export const SPEAKER_COUNT_CONTRACT_VERSION = 5;
export const MIN_SUPPORTED_WORKER_CONTRACT_VERSION = 1;

export function isCompatibleContract(version: number): boolean {
  return Number.isInteger(version) && version >= MIN_SUPPORTED_WORKER_CONTRACT_VERSION && version <= WORKER_CONTRACT_VERSION;
}
