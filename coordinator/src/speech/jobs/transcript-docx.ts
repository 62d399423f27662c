import { Document, HeadingLevel, Packer, Paragraph, TextRun, type IRunOptions } from 'docx';
import { strFromU8, strToU8, unzipSync, zipSync } from 'fflate';
import { formatStockholm } from '@sonar/shared';
import { humanDuration } from './liveness.js';
import { paragraphsOf, speakersOf, type DownloadTranscript } from './transcript-formats.js';

/**
 * The transcript as a Word document (DOCX, Office Open XML): the title, when it was transcribed
 * (with its length and language), the speakers, and the reading paragraphs (paragraphsOf: a new
 * one at each change of speaker or long pause), each headed by its start time and speaker.
 *
 * The file depends on the transcript only, so both doors give the same bytes: the document's
 * created and modified times (docProps/core.xml) are when the pass was transcribed (left out while
 * it runs), and so are the times of the files inside the ZIP (1980-01-01, the ZIP format's first
 * day, while it runs). The docx package stamps both with the present moment; they are set here.
 */

/** The ZIP format's first representable time (its entries' times while the pass still runs). */
const ZIP_EPOCH = new Date(1980, 0, 1);

/** `[hh:mm:ss]` of a media position, as in the speaker-aware transcript. */
function stamp(seconds: number): string {
  const t = Math.max(0, Math.floor(seconds));
  return `[${[Math.floor(t / 3600), Math.floor((t % 3600) / 60), t % 60].map((n) => String(n).padStart(2, '0')).join(':')}]`;
}

/** The line under the title: when it was transcribed, its length and language. */
function facts(t: DownloadTranscript): string {
  const parts: string[] = [t.transcribedAt ? `Transcribed ${formatStockholm(t.transcribedAt)}` : 'Being transcribed (the text may be incomplete)'];
  const duration = humanDuration(t.durationSeconds);
  if (duration) parts.push(`Duration ${duration}`);
  if (t.language) parts.push(`Language ${t.language}`);
  return parts.join(' · ');
}

/** A run with formatting (typed as options: TextRun also takes a string, whose legacy `bold()` would be read here). */
const run = (options: IRunOptions) => new TextRun(options);

function document(t: DownloadTranscript): Document {
  const speakers = speakersOf(t);
  const paragraphs = paragraphsOf(t);
  const children: Paragraph[] = [
    new Paragraph({ heading: HeadingLevel.TITLE, children: [new TextRun(t.title)] }),
    new Paragraph({ children: [new TextRun(facts(t))] }),
  ];
  if (speakers.length) {
    children.push(new Paragraph({ heading: HeadingLevel.HEADING_2, children: [new TextRun('Speakers')] }));
    for (const s of speakers) children.push(new Paragraph({ bullet: { level: 0 }, children: [new TextRun(s.name)] }));
  }
  children.push(new Paragraph({ heading: HeadingLevel.HEADING_2, children: [new TextRun('Transcript')] }));
  if (!paragraphs.length) children.push(new Paragraph({ children: [run({ text: 'The transcript is empty.', italics: true })] }));
  for (const p of paragraphs) {
    const head: TextRun[] = [];
    if (p.start !== null) head.push(run({ text: `${stamp(p.start)} `, color: '666666' }));
    if (p.speaker) head.push(run({ text: `${p.speaker}: `, bold: true }));
    children.push(new Paragraph({ spacing: { after: 160 }, children: [...head, new TextRun(p.text)] }));
  }
  return new Document({
    creator: 'Sonar',
    title: t.title,
    description: 'Transcript',
    sections: [{ children }],
  });
}

/** W3CDTF without fractions of a second, as Word writes it. */
const w3cdtf = (d: Date) => `${d.toISOString().slice(0, 19)}Z`;

/** docProps/core.xml with the transcript's time as created and modified (none while it runs). */
function coreTimes(xml: string, at: Date | null): string {
  return xml.replace(/<dcterms:(created|modified)\b[^>]*>[^<]*<\/dcterms:\1>/g, (_element, name: string) =>
    at ? `<dcterms:${name} xsi:type="dcterms:W3CDTF">${w3cdtf(at)}</dcterms:${name}>` : '',
  );
}

/** The transcript as DOCX bytes; the same bytes for the same transcript (see above). */
export async function transcriptDocx(t: DownloadTranscript): Promise<Buffer> {
  const files = unzipSync(new Uint8Array(await Packer.toBuffer(document(t))));
  const core = files['docProps/core.xml'];
  if (core) files['docProps/core.xml'] = strToU8(coreTimes(strFromU8(core), t.transcribedAt));
  const at = t.transcribedAt && t.transcribedAt > ZIP_EPOCH ? t.transcribedAt : ZIP_EPOCH;
  return Buffer.from(zipSync(files, { mtime: at, level: 6 }));
}
