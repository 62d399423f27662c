// Original file: worker.proto


export interface ProgressAck {
  'segments_stored'?: (number);
}

export interface ProgressAck__Output {
  'segments_stored': (number);
}
