// Original file: worker.proto


export interface CompleteResponse {
  /**
   * True when this attempt had already been completed with the same outcome.
   */
  'duplicate'?: (boolean);
  /**
   * The job's status afterwards.
   */
  'status'?: (string);
}

export interface CompleteResponse__Output {
  /**
   * True when this attempt had already been completed with the same outcome.
   */
  'duplicate': (boolean);
  /**
   * The job's status afterwards.
   */
  'status': (string);
}
