// Original file: worker.proto

import type { Capabilities as _sonar_worker_v1_Capabilities, Capabilities__Output as _sonar_worker_v1_Capabilities__Output } from '../../../sonar/worker/v1/Capabilities.js';
import type { LeaseRef as _sonar_worker_v1_LeaseRef, LeaseRef__Output as _sonar_worker_v1_LeaseRef__Output } from '../../../sonar/worker/v1/LeaseRef.js';

export interface HelloRequest {
  'contract_version'?: (number);
  'agent_version'?: (string);
  'hostname'?: (string);
  'capabilities'?: (_sonar_worker_v1_Capabilities | null);
  /**
   * True for the coordinator's own local runner (quick start); informational.
   */
  'local'?: (boolean);
  /**
   * Contract 2: the leases this process still works under (after a reconnect). Every other open
   * lease of this worker belongs to an earlier process that is gone: the coordinator ends it at
   * once (outcome "abandoned") and queues its job again, instead of waiting for the lease to expire.
   */
  'held_leases'?: (_sonar_worker_v1_LeaseRef)[];
  /**
   * A check, not a connection (`sonar-worker doctor`): the coordinator authenticates the secret and
   * checks the contract version as for any Hello, then answers without a session (session_id
   * empty). Nothing is registered: no presence, no capabilities, no lease of this worker ends.
   */
  'probe'?: (boolean);
}

export interface HelloRequest__Output {
  'contract_version': (number);
  'agent_version': (string);
  'hostname': (string);
  'capabilities': (_sonar_worker_v1_Capabilities__Output | null);
  /**
   * True for the coordinator's own local runner (quick start); informational.
   */
  'local': (boolean);
  /**
   * Contract 2: the leases this process still works under (after a reconnect). Every other open
   * lease of this worker belongs to an earlier process that is gone: the coordinator ends it at
   * once (outcome "abandoned") and queues its job again, instead of waiting for the lease to expire.
   */
  'held_leases': (_sonar_worker_v1_LeaseRef__Output)[];
  /**
   * A check, not a connection (`sonar-worker doctor`): the coordinator authenticates the secret and
   * checks the contract version as for any Hello, then answers without a session (session_id
   * empty). Nothing is registered: no presence, no capabilities, no lease of this worker ends.
   */
  'probe': (boolean);
}
