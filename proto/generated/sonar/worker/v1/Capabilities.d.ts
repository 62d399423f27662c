// Original file: worker.proto

import type { ModelLanguages as _sonar_worker_v1_ModelLanguages, ModelLanguages__Output as _sonar_worker_v1_ModelLanguages__Output } from '../../../sonar/worker/v1/ModelLanguages.js';

export interface Capabilities {
  /**
   * Speech models this worker really has (e.g. "small", "large", "turbo").
   */
  'models'?: (string)[];
  /**
   * Engines available on the host (e.g. "whisper.cpp", "pocketsphinx").
   */
  'engines'?: (string)[];
  'diarization'?: (boolean);
  /**
   * Whether the worker may download external source URLs itself.
   */
  'can_fetch_urls'?: (boolean);
  /**
   * "cpu", "cuda:0", ...
   */
  'device'?: (string);
  /**
   * Languages each model transcribes. A model not listed here, or listed without languages, is
   * taken to accept any language (and "detect"); the coordinator refuses other languages at submit.
   */
  'model_languages'?: (_sonar_worker_v1_ModelLanguages)[];
  /**
   * Contract 3: the diarization engine (with `diarization`), e.g. "silero-vad+mfcc-ahc".
   */
  'diarization_engine'?: (string);
  /**
   * Contract 3: why this worker cannot diarize although it has a diarizer configured
   * (missing or broken model files); shown to operators. Empty when `diarization` is true.
   */
  'diarization_error'?: (string);
}

export interface Capabilities__Output {
  /**
   * Speech models this worker really has (e.g. "small", "large", "turbo").
   */
  'models': (string)[];
  /**
   * Engines available on the host (e.g. "whisper.cpp", "pocketsphinx").
   */
  'engines': (string)[];
  'diarization': (boolean);
  /**
   * Whether the worker may download external source URLs itself.
   */
  'can_fetch_urls': (boolean);
  /**
   * "cpu", "cuda:0", ...
   */
  'device': (string);
  /**
   * Languages each model transcribes. A model not listed here, or listed without languages, is
   * taken to accept any language (and "detect"); the coordinator refuses other languages at submit.
   */
  'model_languages': (_sonar_worker_v1_ModelLanguages__Output)[];
  /**
   * Contract 3: the diarization engine (with `diarization`), e.g. "silero-vad+mfcc-ahc".
   */
  'diarization_engine': (string);
  /**
   * Contract 3: why this worker cannot diarize although it has a diarizer configured
   * (missing or broken model files); shown to operators. Empty when `diarization` is true.
   */
  'diarization_error': (string);
}
