// Original file: worker.proto


/**
 * One recognised word: seconds from the start of the audio, and its text.
 */
export interface WordMsg {
  'start'?: (number | string);
  'end'?: (number | string);
  'text'?: (string);
}

/**
 * One recognised word: seconds from the start of the audio, and its text.
 */
export interface WordMsg__Output {
  'start': (number);
  'end': (number);
  'text': (string);
}
