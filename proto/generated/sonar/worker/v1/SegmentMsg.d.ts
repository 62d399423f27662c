// Original file: worker.proto

import type { WordMsg as _sonar_worker_v1_WordMsg, WordMsg__Output as _sonar_worker_v1_WordMsg__Output } from '../../../sonar/worker/v1/WordMsg.js';

export interface SegmentMsg {
  /**
   * 0-based, consecutive within an attempt.
   */
  'seq'?: (number);
  'start'?: (number | string);
  'end'?: (number | string);
  'text'?: (string);
  /**
   * The segment's words with their times, when the engine gives word times (pocketsphinx
   * `-time yes`, whisper.cpp word timestamps); empty otherwise. The coordinator labels each word
   * with a speaker and splits the stored segment where the speaker changes. Added without a
   * contract bump: an older coordinator ignores it, an older worker sends none.
   */
  'words'?: (_sonar_worker_v1_WordMsg)[];
}

export interface SegmentMsg__Output {
  /**
   * 0-based, consecutive within an attempt.
   */
  'seq': (number);
  'start': (number);
  'end': (number);
  'text': (string);
  /**
   * The segment's words with their times, when the engine gives word times (pocketsphinx
   * `-time yes`, whisper.cpp word timestamps); empty otherwise. The coordinator labels each word
   * with a speaker and splits the stored segment where the speaker changes. Added without a
   * contract bump: an older coordinator ignores it, an older worker sends none.
   */
  'words': (_sonar_worker_v1_WordMsg__Output)[];
}
