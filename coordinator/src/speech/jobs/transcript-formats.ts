import type { SpeechJob, SpeechSegment } from './entities.js';
import { speakerKey, speakerName, type SpeakerLabels, type StoredTurn } from './speakers.js';
import { DEFAULT_CUE_LIMITS, buildCues, type Cue, type CueLimits } from './subtitle-cues.js';

/** One segment as the downloads read it (seconds; speaker key such as `S1`, or null). */
export interface DownloadSegment {
  start: number;
  end: number;
  text: string;
  speaker: string | null;
  /** The segment's words when the engine gave word times (JSON lists them, each with the segment's speaker). */
  words?: Array<{ start: number; end: number; text: string }> | null;
}

export interface DownloadTranscript {
  /** Null on the public share page, which identifies no job. */
  jobId: number | null;
  title: string;
  language: string | null;
  model: string | null;
  pass: number;
  status: string;
  durationSeconds: number | null;
  /** The stored full text (used for TXT when there are no segments). */
  transcriptText: string | null;
  segments: DownloadSegment[];
  /** Names given to speakers (`{ S1: 'Anna' }`); keys without a name read "Speaker N". */
  speakerLabels: SpeakerLabels;
}

export const TRANSCRIPT_FORMATS = ['txt', 'srt', 'vtt', 'json'] as const;
export type TranscriptFormat = (typeof TRANSCRIPT_FORMATS)[number];

export const TRANSCRIPT_MEDIA_TYPES: Record<TranscriptFormat, string> = {
  txt: 'text/plain; charset=utf-8',
  srt: 'application/x-subrip; charset=utf-8',
  vtt: 'text/vtt; charset=utf-8',
  json: 'application/json; charset=utf-8',
};

/** `hh:mm:ss` + separator + milliseconds: SRT uses a comma, WebVTT a full stop. */
function cueTime(seconds: number, separator: ',' | '.'): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

/**
 * Cues from segments: text on one line (a blank line would end a cue early), empty segments left
 * out, and an end never before the start (a zero-length segment gets a tenth of a second).
 */
function cues(t: DownloadTranscript) {
  return t.segments
    .map((s) => ({ ...s, text: s.text.replace(/\s+/g, ' ').trim() }))
    .filter((s) => s.text)
    .map((s) => ({
      start: s.start,
      end: s.end > s.start ? s.end : s.start + 0.1,
      text: s.text,
      speaker: s.speaker ? speakerName(s.speaker, t.speakerLabels) : null,
    }));
}

/** Plain text: a speaker line per turn when speakers are known, else the text paragraph by segment. */
export function transcriptTxt(t: DownloadTranscript): string {
  const list = cues(t);
  if (!list.length) return `${(t.transcriptText ?? '').trim()}\n`;
  const lines: string[] = [];
  let speaker: string | null | undefined;
  for (const c of list) {
    if (c.speaker && c.speaker !== speaker) lines.push(`${lines.length ? '\n' : ''}${c.speaker}:`);
    speaker = c.speaker;
    lines.push(c.text);
  }
  return `${lines.join('\n')}\n`;
}

/** The transcript's subtitle cues (subtitle-cues.ts): word-timed, within the limits, never across a change of speaker. */
export function subtitleCues(t: DownloadTranscript, limits: CueLimits = DEFAULT_CUE_LIMITS): Cue[] {
  return buildCues(
    t.segments.map((s) => ({
      start: s.start,
      end: s.end,
      text: s.text,
      speakerKey: s.speaker,
      speakerName: s.speaker ? speakerName(s.speaker, t.speakerLabels) : null,
      words: s.words ?? null,
    })),
    limits,
  );
}

/** SubRip: numbered cues, `00:00:01,500 --> 00:00:03,000`, the speaker marked on the first cue of each turn (`Name: `, or `- `). */
export function transcriptSrt(t: DownloadTranscript, limits: CueLimits = DEFAULT_CUE_LIMITS): string {
  return subtitleCues(t, limits)
    .map((c, i) => {
      const lines = [`${c.prefix}${c.lines[0] ?? ''}`, ...c.lines.slice(1)];
      return `${i + 1}\n${cueTime(c.start, ',')} --> ${cueTime(c.end, ',')}\n${lines.join('\n')}\n`;
    })
    .join('\n');
}

/** WebVTT: the header, then cues with a `<v Speaker>` voice span on every cue that has a speaker. */
export function transcriptVtt(t: DownloadTranscript, limits: CueLimits = DEFAULT_CUE_LIMITS): string {
  // "-->" may not occur in cue text; "<" and "&" are markup in WebVTT.
  const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const body = subtitleCues(t, limits).map(
    (c, i) =>
      `${i + 1}\n${cueTime(c.start, '.')} --> ${cueTime(c.end, '.')}\n${c.speakerName ? `<v ${escape(c.speakerName)}>` : ''}${c.lines.map(escape).join('\n')}\n`,
  );
  return `WEBVTT\n\n${body.join('\n')}`;
}

/**
 * JSON: the job's identity and the segments with times and speakers (key and display name); a
 * segment with word times lists its `words`, each with its speaker (segments are split where the
 * speaker changes, so a word's speaker is its segment's).
 */
export function transcriptJson(t: DownloadTranscript) {
  return {
    ...(t.jobId === null ? {} : { job_id: t.jobId }),
    title: t.title,
    language: t.language,
    model: t.model,
    pass: t.pass,
    status: t.status,
    duration_seconds: t.durationSeconds,
    text: t.segments.length ? t.segments.map((s) => s.text.trim()).join(' ') : (t.transcriptText ?? ''),
    segments: t.segments.map((s) => ({
      start: s.start,
      end: s.end,
      text: s.text.trim(),
      speaker: s.speaker,
      speaker_name: s.speaker ? speakerName(s.speaker, t.speakerLabels) : null,
      ...(s.words?.length ? { words: s.words.map((w) => ({ start: w.start, end: w.end, text: w.text, speaker: s.speaker })) } : {}),
    })),
  };
}

export function renderTranscript(t: DownloadTranscript, format: TranscriptFormat, limits: CueLimits = DEFAULT_CUE_LIMITS): string {
  switch (format) {
    case 'txt':
      return transcriptTxt(t);
    case 'srt':
      return transcriptSrt(t, limits);
    case 'vtt':
      return transcriptVtt(t, limits);
    case 'json':
      return `${JSON.stringify(transcriptJson(t), null, 2)}\n`;
  }
}

/** RTTM downloads (the diarizer's speaker turns). */
export const RTTM_MEDIA_TYPE = 'text/plain; charset=utf-8';

/**
 * The speaker turns as RTTM (NIST Rich Transcription Time Marked): one line per turn,
 * `SPEAKER <file-id> 1 <start> <duration> <NA> <NA> <speaker key> <NA> <NA>`, seconds with three
 * decimals, sorted by start; the keys are the job's (`S1`…), as on the segments. The file id has
 * no whitespace (RTTM fields are separated by spaces).
 */
export function transcriptRttm(fileId: string, turns: readonly StoredTurn[]): string {
  const id = fileId.replace(/\s+/g, '_') || 'transcript';
  const lines = [...turns]
    .filter(([start, end]) => Number.isFinite(start) && Number.isFinite(end) && end > start)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2])
    .map(([start, end, spk]) => `SPEAKER ${id} 1 ${start.toFixed(3)} ${(end - start).toFixed(3)} <NA> <NA> ${speakerKey(spk)} <NA> <NA>`);
  return lines.length ? `${lines.join('\n')}\n` : '';
}

/** The file name part of an attachment: the title without path or control characters. */
function fileBase(title: string): string {
  return (
    title
      .replace(/[\p{Cc}/\\:*?"<>|]+/gu, ' ')
      .replace(/\s+/g, ' ')
      .trim()
      .slice(0, 120) || 'transcript'
  );
}

/**
 * `Content-Disposition: attachment` with the title as file name: an ASCII fallback and the UTF-8
 * name (RFC 6266 / RFC 5987), so a title with quotes, slashes or non-Latin letters stays safe.
 */
export function attachmentDisposition(title: string, format: TranscriptFormat | 'rttm'): string {
  const base = fileBase(title);
  const ascii = base.replace(/[^\x20-\x7e]/g, '_').replace(/[%;]/g, '_');
  return `attachment; filename="${ascii}.${format}"; filename*=UTF-8''${encodeURIComponent(`${base}.${format}`)}`;
}

/** A job's current pass as the downloads read it. */
export function downloadOfJob(job: SpeechJob, segments: SpeechSegment[], title: string): DownloadTranscript {
  return {
    jobId: job.id,
    title,
    language: job.language,
    model: job.model,
    pass: job.currentPass,
    status: job.status,
    durationSeconds: job.sourceDurationSeconds,
    transcriptText: job.transcriptText,
    segments: segments.map((s) => ({ start: s.startSeconds, end: s.endSeconds, text: s.text, speaker: s.speaker, words: s.words })),
    speakerLabels: job.speakerLabels,
  };
}
