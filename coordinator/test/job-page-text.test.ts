import { describe, expect, it } from 'vitest';
import { speedText } from '../src/speech/job-page.js';

describe('job page wording', () => {
  it('says how fast a transcription runs without an ambiguous "× real time"', () => {
    expect(speedText(1.9)).toBe('1.9× faster than real time');
    expect(speedText(1)).toBe('1.0× faster than real time');
    expect(speedText(0.52)).toBe('taking 1.9× the recording’s length');
  });
});
