import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { transcriptDocx } from '../src/speech/jobs/transcript-docx.js';
import {
  attachmentDisposition,
  downloadName,
  paragraphsOf,
  rttmFileId,
  transcriptJson,
  transcriptTxt,
  type DownloadTranscript,
} from '../src/speech/jobs/transcript-formats.js';

const dir = mkdtempSync(path.join(tmpdir(), 'sonar-docx-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The named part of a DOCX, read by the real consumer (`unzip -p`). */
function unzipPart(bytes: Buffer, part: string): string {
  const file = path.join(dir, `${Math.random().toString(36).slice(2)}.docx`);
  writeFileSync(file, bytes);
  return execFileSync('unzip', ['-p', file, part], { encoding: 'utf8' });
}

const transcript = (over: Partial<DownloadTranscript> = {}): DownloadTranscript => ({
  jobId: 7,
  title: 'jfk.wav',
  language: 'en',
  model: 'small',
  pass: 2,
  status: 'completed',
  durationSeconds: 11,
  transcribedAt: new Date('2026-01-15T12:30:00.250Z'),
  transcriptText: 'And so my fellow Americans ask not.',
  segments: [
    { start: 0, end: 2.5, text: ' And so my fellow', speaker: 'S1', words: [{ start: 0.1, end: 0.4, text: 'And' }] },
    { start: 2.5, end: 4, text: 'Americans, <ask> & not.', speaker: 'S2' },
    { start: 4, end: 4.5, text: '  ', speaker: 'S2' },
    { start: 70, end: 75, text: 'What you can do.', speaker: 'S2' },
  ],
  speakerLabels: { S1: 'Anna' },
  turns: [[0, 2.5, 0]],
  ...over,
});

describe('download names', () => {
  it('drop a media extension of the title, keep any other name', () => {
    expect(downloadName('jfk.wav')).toBe('jfk');
    expect(downloadName('Interview 3.MP4')).toBe('Interview 3');
    expect(downloadName('Board meeting 3.5')).toBe('Board meeting 3.5');
    expect(downloadName('notes.final')).toBe('notes.final');
    expect(downloadName('.wav')).toBe('.wav');
    expect(downloadName('a/b: c.opus')).toBe('a b c');
    expect(attachmentDisposition('jfk.wav', 'srt')).toBe(`attachment; filename="jfk.srt"; filename*=UTF-8''jfk.srt`);
    expect(attachmentDisposition('Möte.m4a', 'docx')).toBe(`attachment; filename="M_te.docx"; filename*=UTF-8''M%C3%B6te.docx`);
    expect(rttmFileId('Board meeting.mp3')).toBe('Board_meeting');
  });
});

describe('JSON', () => {
  it('carries the job, the speakers (key and name) and each word with times and speaker', () => {
    const json = transcriptJson(transcript());
    expect(json).toMatchObject({ job_id: 7, model: 'small', pass: 2, transcribed_at: '2026-01-15T12:30:00.250Z' });
    expect(json.speakers).toEqual([
      { key: 'S1', name: 'Anna' },
      { key: 'S2', name: 'Speaker 2' },
    ]);
    expect(json.segments[0]).toEqual({
      start: 0,
      end: 2.5,
      text: 'And so my fellow',
      speaker: 'S1',
      speaker_name: 'Anna',
      words: [{ start: 0.1, end: 0.4, text: 'And', speaker: 'S1', speaker_name: 'Anna' }],
    });
    expect(transcriptJson(transcript({ jobId: null })).job_id).toBeNull();
  });
});

describe('TXT and paragraphs', () => {
  it('TXT: a name line at each change of speaker; paragraphs: also after a long pause, with start times', () => {
    expect(transcriptTxt(transcript())).toBe('Anna:\nAnd so my fellow\n\nSpeaker 2:\nAmericans, <ask> & not.\nWhat you can do.\n');
    expect(paragraphsOf(transcript())).toEqual([
      { speaker: 'Anna', start: 0, text: 'And so my fellow' },
      { speaker: 'Speaker 2', start: 2.5, text: 'Americans, <ask> & not.' },
      { speaker: 'Speaker 2', start: 70, text: 'What you can do.' },
    ]);
  });
});

describe('DOCX', () => {
  it('holds the title, date, speakers and every paragraph with its speaker and time', async () => {
    const bytes = await transcriptDocx(transcript());
    const xml = unzipPart(bytes, 'word/document.xml');
    for (const text of ['jfk.wav', 'Transcribed ', 'Speakers', 'Anna', 'Speaker 2', '[00:00:00] ', '[00:00:02] ', '[00:01:10] ', 'What you can do.']) {
      expect(xml, text).toContain(text);
    }
    expect(xml).toContain('Americans, &lt;ask&gt; &amp; not.');
    const core = unzipPart(bytes, 'docProps/core.xml');
    expect(core).toContain('<dcterms:created xsi:type="dcterms:W3CDTF">2026-01-15T12:30:00Z</dcterms:created>');
    expect(core).toContain('<dcterms:modified xsi:type="dcterms:W3CDTF">2026-01-15T12:30:00Z</dcterms:modified>');
  });

  it('is the same bytes for the same transcript, whenever it is made', async () => {
    const first = await transcriptDocx(transcript());
    await new Promise((resolve) => setTimeout(resolve, 2100)); // past the ZIP format's two-second time resolution
    expect((await transcriptDocx(transcript())).equals(first)).toBe(true);
    // A running pass has no date yet: no created time, and the same bytes too.
    const running = transcript({ status: 'running', transcribedAt: null });
    const a = await transcriptDocx(running);
    expect(unzipPart(a, 'docProps/core.xml')).not.toContain('dcterms:created');
    expect((await transcriptDocx(running)).equals(a)).toBe(true);
  });
});
