// Original file: worker.proto


export interface ClaimRequest {
  'session_id'?: (string);
  /**
   * How long the coordinator may hold the call open waiting for work (capped by the coordinator).
   */
  'wait_ms'?: (number);
}

export interface ClaimRequest__Output {
  'session_id': (string);
  /**
   * How long the coordinator may hold the call open waiting for work (capped by the coordinator).
   */
  'wait_ms': (number);
}
