// Original file: worker.proto


/**
 * Identifies one attempt at one job; every progress and completion message carries it.
 */
export interface LeaseRef {
  'job_id'?: (number);
  'attempt'?: (number);
  'lease_token'?: (string);
}

/**
 * Identifies one attempt at one job; every progress and completion message carries it.
 */
export interface LeaseRef__Output {
  'job_id': (number);
  'attempt': (number);
  'lease_token': (string);
}
