// Original file: worker.proto


export interface SegmentMsg {
  /**
   * 0-based, consecutive within an attempt.
   */
  'seq'?: (number);
  'start'?: (number | string);
  'end'?: (number | string);
  'text'?: (string);
}

export interface SegmentMsg__Output {
  /**
   * 0-based, consecutive within an attempt.
   */
  'seq': (number);
  'start': (number);
  'end': (number);
  'text': (string);
}
