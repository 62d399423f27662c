import type { SpeechJob, SpeechSegment } from './entities.js';
import { speakerKey, speakerName, turnsFromSegments, type SpeakerLabels, type StoredTurn } from './speakers.js';
import { DEFAULT_CUE_LIMITS, buildCues, type Cue, type CueLimits } from './subtitle-cues.js';

/**
 * The transcript downloads (TXT, SRT, WebVTT, JSON, DOCX and the speaker turns as RTTM), rendered
 * from one DownloadTranscript that downloadOfJob builds for both doors: the signed-in API
 * (transcript-routes.ts, linked from the job page) and the public share page (shares/share-page.ts).
 * The files are the same at both doors, except what the share page hides (`job_id`, see
 * downloadOfJob); transcript-download.ts sends them (headers, file name, media type).
 */

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
  /** The job's id; null on the public share page, which identifies no job. */
  jobId: number | null;
  /** The owner's title, else the uploaded file's name, else "Transcript" (never the source URL). */
  title: string;
  language: string | null;
  model: string | null;
  pass: number;
  status: string;
  durationSeconds: number | null;
  /** When the current pass completed (null while it runs): the DOCX's date and creation time. */
  transcribedAt: Date | null;
  /** The stored full text (used for TXT when there are no segments). */
  transcriptText: string | null;
  segments: DownloadSegment[];
  /** Names given to speakers (`{ S1: 'Anna' }`); keys without a name read "Speaker N". */
  speakerLabels: SpeakerLabels;
  /** The diarizer's speaker turns (sorted) when the pass has a completed diarization, for RTTM; null otherwise. */
  turns: StoredTurn[] | null;
}

/** The text downloads (rendered by renderTranscript); DOCX (transcript-docx.ts) and RTTM are the other two. */
export const TRANSCRIPT_FORMATS = ['txt', 'srt', 'vtt', 'json'] as const;
export type TranscriptFormat = (typeof TRANSCRIPT_FORMATS)[number];
/** Every download of a transcript, in the order the job page and the share page list them. */
export const DOWNLOAD_FORMATS = [...TRANSCRIPT_FORMATS, 'docx', 'rttm'] as const;
export type DownloadFormat = (typeof DOWNLOAD_FORMATS)[number];

export const TRANSCRIPT_MEDIA_TYPES: Record<TranscriptFormat, string> = {
  txt: 'text/plain; charset=utf-8',
  srt: 'application/x-subrip; charset=utf-8',
  vtt: 'text/vtt; charset=utf-8',
  json: 'application/json; charset=utf-8',
};

export const DOCX_MEDIA_TYPE = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

/** RTTM downloads (the diarizer's speaker turns). */
export const RTTM_MEDIA_TYPE = 'text/plain; charset=utf-8';

export const DOWNLOAD_MEDIA_TYPES: Record<DownloadFormat, string> = { ...TRANSCRIPT_MEDIA_TYPES, docx: DOCX_MEDIA_TYPE, rttm: RTTM_MEDIA_TYPE };

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
 * The segments people read, in order: text on one line, empty segments left out, the speaker by
 * name. TXT, DOCX and the share page's reading view read these (the subtitles build their own cues).
 */
export function spokenSegments(t: Pick<DownloadTranscript, 'segments' | 'speakerLabels'>) {
  return t.segments
    .map((s) => ({ start: s.start, end: s.end, text: s.text.replace(/\s+/g, ' ').trim(), speaker: s.speaker ? speakerName(s.speaker, t.speakerLabels) : null }))
    .filter((s) => s.text);
}

/** Plain text: a speaker line per turn when speakers are known, else the text paragraph by segment. */
export function transcriptTxt(t: DownloadTranscript): string {
  const list = spokenSegments(t);
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

export interface Paragraph {
  /** The speaker's name (null without diarization). */
  speaker: string | null;
  /** Where the paragraph starts, in seconds (null for text without segments). */
  start: number | null;
  text: string;
}

const SENTENCE_END = /[.!?…]["'”’)\]]?$/;

/**
 * Reading paragraphs (the share page's reading view and the DOCX): a new paragraph when the
 * speaker changes, after a pause of 2.5 seconds or more, or once a paragraph is long and a sentence
 * ends. Without segments the stored transcript text is split the same way by length.
 */
export function paragraphsOf(t: Pick<DownloadTranscript, 'segments' | 'speakerLabels' | 'transcriptText'>): Paragraph[] {
  const out: Paragraph[] = [];
  const spoken = spokenSegments(t);
  if (spoken.length > 0) {
    let current: Paragraph | null = null;
    let previousEnd: number | null = null;
    for (const s of spoken) {
      const pause = previousEnd !== null && s.start - previousEnd >= 2.5;
      const long = current !== null && current.text.length >= 600 && SENTENCE_END.test(current.text);
      if (!current || current.speaker !== s.speaker || pause || long) {
        current = { speaker: s.speaker, start: s.start, text: s.text };
        out.push(current);
      } else {
        current.text += ` ${s.text}`;
      }
      previousEnd = s.end;
    }
    return out;
  }
  for (const block of (t.transcriptText ?? '').split(/\n\s*\n/)) {
    const sentences = block
      .trim()
      .replace(/\s+/g, ' ')
      .split(/(?<=[.!?…])\s+/)
      .filter(Boolean);
    let text = '';
    for (const sentence of sentences) {
      text = text ? `${text} ${sentence}` : sentence;
      if (text.length >= 600) {
        out.push({ speaker: null, start: null, text });
        text = '';
      }
    }
    if (text) out.push({ speaker: null, start: null, text });
  }
  return out;
}

/** The speakers of the transcript (key and name), in the order they first speak. */
export function speakersOf(t: Pick<DownloadTranscript, 'segments' | 'speakerLabels'>): Array<{ key: string; name: string }> {
  const keys = [...new Set(t.segments.filter((s) => s.speaker && s.text.trim()).map((s) => s.speaker!))];
  return keys.map((key) => ({ key, name: speakerName(key, t.speakerLabels) }));
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
 * JSON: the job's identity and the segments with times and speakers (`speaker` the key such as
 * `S1`, the RTTM's; `speaker_name` the name people see); a segment with word times lists its
 * `words`, each with its speaker (segments are split where the speaker changes, so a word's
 * speaker is its segment's). `speakers` lists each speaker once (key and name).
 */
export function transcriptJson(t: DownloadTranscript) {
  const name = (key: string | null) => (key ? speakerName(key, t.speakerLabels) : null);
  return {
    job_id: t.jobId,
    title: t.title,
    language: t.language,
    model: t.model,
    pass: t.pass,
    status: t.status,
    duration_seconds: t.durationSeconds,
    transcribed_at: t.transcribedAt ? t.transcribedAt.toISOString() : null,
    speakers: speakersOf(t),
    text: t.segments.length ? t.segments.map((s) => s.text.trim()).join(' ') : (t.transcriptText ?? ''),
    segments: t.segments.map((s) => ({
      start: s.start,
      end: s.end,
      text: s.text.trim(),
      speaker: s.speaker,
      speaker_name: name(s.speaker),
      ...(s.words?.length
        ? { words: s.words.map((w) => ({ start: w.start, end: w.end, text: w.text, speaker: s.speaker, speaker_name: name(s.speaker) })) }
        : {}),
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

/** Extensions of audio and video files: a title that ends in one (the uploaded file's name) loses it in download names. */
const MEDIA_EXTENSIONS = new Set(
  '3gp aac aif aifc aiff amr ape au avi caf flac m2ts m4a m4b m4v mka mkv mov mp2 mp3 mp4 mpeg mpg mpga mts oga ogg ogv opus ra spx ts wav weba webm wma wmv'.split(
    ' ',
  ),
);

/**
 * The name of a download without its extension: the title (safe for a file name), less a media
 * file's extension, so the upload `jfk.wav` downloads as `jfk.srt`, not `jfk.wav.srt`; a title
 * without one keeps its name (`Board meeting 3.5` → `Board meeting 3.5.srt`).
 */
export function downloadName(title: string): string {
  const base = fileBase(title);
  const m = /^(.*[^\s.])\.([A-Za-z0-9]{2,5})$/.exec(base);
  return m && MEDIA_EXTENSIONS.has(m[2]!.toLowerCase()) ? m[1]! : base;
}

/**
 * `Content-Disposition: attachment` with the download's name (downloadName) and the format's
 * extension: an ASCII fallback and the UTF-8 name (RFC 6266 / RFC 5987), so a title with quotes,
 * slashes or non-Latin letters stays safe.
 */
export function attachmentDisposition(title: string, format: DownloadFormat): string {
  const base = downloadName(title);
  const ascii = base.replace(/[^\x20-\x7e]/g, '_').replace(/[%;]/g, '_');
  return `attachment; filename="${ascii}.${format}"; filename*=UTF-8''${encodeURIComponent(`${base}.${format}`)}`;
}

/** The RTTM `<file-id>` of a transcript: its download name without whitespace, the same at every door (`jfk` for `jfk.wav`). */
export function rttmFileId(title: string): string {
  return downloadName(title).replace(/\s+/g, '_');
}

/**
 * The title of a job's downloads: the owner's title, else the uploaded file's name, else
 * "Transcript". Never the source URL (it may be private, and the share page never shows it).
 */
export function downloadTitle(job: Pick<SpeechJob, 'sourceLabel' | 'sourceFilename'>): string {
  return job.sourceLabel ?? job.sourceFilename ?? 'Transcript';
}

/**
 * A job's current pass as every download reads it, at both doors. `shared`: for the public share
 * page, which hides the job's id (`job_id` is null; the RTTM file id is the title's, never the
 * job's); everything else is the same, so the files are too.
 */
export function downloadOfJob(
  job: SpeechJob,
  segments: ReadonlyArray<Pick<SpeechSegment, 'startSeconds' | 'endSeconds' | 'text' | 'speaker' | 'words'>>,
  opts: { shared: boolean },
): DownloadTranscript {
  return {
    jobId: opts.shared ? null : job.id,
    title: downloadTitle(job),
    language: job.language,
    model: job.model,
    pass: job.currentPass,
    status: job.status,
    durationSeconds: job.sourceDurationSeconds ?? segments.at(-1)?.endSeconds ?? null,
    transcribedAt: job.status === 'completed' ? job.finishedAt : null,
    transcriptText: job.transcriptText,
    segments: segments.map((s) => ({ start: s.startSeconds, end: s.endSeconds, text: s.text, speaker: s.speaker, words: s.words })),
    speakerLabels: job.speakerLabels,
    // A pass its owner corrected has the speakers of its segments, no longer the diarizer's turns.
    turns:
      job.diarizationState !== 'completed' || !job.diarizationTurns
        ? null
        : job.transcriptRevisedPass === job.currentPass
          ? turnsFromSegments(segments)
          : [...job.diarizationTurns].sort((a, b) => a[0] - b[0] || a[1] - b[1]),
  };
}
