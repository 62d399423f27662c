// Original file: worker.proto


export interface SpeakerTurn {
  'start'?: (number | string);
  'end'?: (number | string);
  'speaker'?: (number);
}

export interface SpeakerTurn__Output {
  'start': (number);
  'end': (number);
  'speaker': (number);
}
