// Original file: worker.proto


export interface ModelLanguages {
  'model'?: (string);
  /**
   * ISO 639-1 codes, e.g. "en".
   */
  'languages'?: (string)[];
}

export interface ModelLanguages__Output {
  'model': (string);
  /**
   * ISO 639-1 codes, e.g. "en".
   */
  'languages': (string)[];
}
