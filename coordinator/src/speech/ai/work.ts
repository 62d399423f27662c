import { z } from 'zod';
import type { AiProvider, ChatMessage } from './provider.js';
import { AiProviderError } from './provider.js';

/**
 * What the provider is asked, and how long transcripts are split. Every system prompt starts with
 * a `Task:` line naming the request kind (analysis, analysis-part, analysis-merge, translation,
 * translate-analysis, title), which also makes requests easy to tell apart in upstream logs.
 */

/** The documented shape of `analysis.result` (README "AI analysis, translations and titles"). */
export const analysisResultSchema = z.object({
  summary: z.string().trim().min(1, 'the summary is empty'),
  key_points: z.array(z.string()).default([]),
  action_items: z.array(z.string()).default([]),
  topics: z.array(z.string()).default([]),
});
export type AnalysisResult = z.infer<typeof analysisResultSchema>;

const titleSchema = z.object({ title: z.string().trim().min(1, 'the title is empty') });
const segmentsReplySchema = z.object({ segments: z.array(z.object({ seq: z.number().int(), text: z.string() })) });

const displayNames = new Intl.DisplayNames(['en'], { type: 'language' });

/** "German (de)" for a language code; "the transcript's own language" for none. */
export function languageName(code: string | null): string {
  if (!code) return "the transcript's own language";
  let name: string | undefined;
  try {
    name = displayNames.of(code);
  } catch {
    name = undefined;
  }
  return name && name !== code ? `${name} (${code})` : code;
}

const ANALYSIS_SHAPE =
  'Reply with one JSON object and nothing else: {"summary": string, "key_points": string[], "action_items": string[], "topics": string[]}. ' +
  'summary: a few sentences; key_points: the main points; action_items: tasks or follow-ups someone committed to or was asked to do ' +
  '(empty when there are none; name who when the transcript says); topics: short topic labels.';

const analysisPrompt = (language: string | null, speakerAware: boolean): string =>
  [
    'Task: analysis',
    'You analyse transcripts of recordings.',
    speakerAware ? 'Lines start with a timestamp and the speaker; keep track of who said what.' : '',
    `Write every value in ${languageName(language)}.`,
    ANALYSIS_SHAPE,
  ]
    .filter(Boolean)
    .join('\n');

const partPrompt = (language: string | null, speakerAware: boolean, part: number, parts: number): string =>
  [
    'Task: analysis-part',
    `You analyse part ${part} of ${parts} of a long transcript; other parts are analysed separately and merged later.`,
    speakerAware ? 'Lines start with a timestamp and the speaker; keep track of who said what.' : '',
    `Write every value in ${languageName(language)}.`,
    ANALYSIS_SHAPE,
  ]
    .filter(Boolean)
    .join('\n');

const mergePrompt = (language: string | null): string =>
  [
    'Task: analysis-merge',
    'You merge analyses of consecutive parts of one transcript into one analysis of the whole: one summary, ' +
      'deduplicated key points, action items and topics, in the order they occur.',
    `Write every value in ${languageName(language)}.`,
    ANALYSIS_SHAPE,
  ].join('\n');

/**
 * Splits text into chunks of at most `max` characters at line breaks, else at sentence ends, else
 * hard (a single line longer than a chunk).
 */
export function chunkText(text: string, max: number): string[] {
  const units = text
    .split(/\n+/)
    .flatMap((line) => (line.length <= max ? [line] : (line.match(/[^.!?…]+[.!?…]*\s*/g) ?? [line])))
    .flatMap((unit) => {
      const pieces: string[] = [];
      for (let i = 0; i < unit.length; i += max) pieces.push(unit.slice(i, i + max));
      return pieces;
    })
    .filter((u) => u.trim());
  const chunks: string[] = [];
  let current = '';
  for (const unit of units) {
    if (current && current.length + 1 + unit.length > max) {
      chunks.push(current);
      current = '';
    }
    current = current ? `${current}\n${unit}` : unit;
  }
  if (current) chunks.push(current);
  return chunks;
}

/** Groups items (by their JSON length) into batches of at most `max` characters each. */
function batches<T>(items: T[], max: number): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const item of items) {
    const len = JSON.stringify(item).length + 1;
    if (current.length && size + len > max) {
      out.push(current);
      current = [];
      size = 0;
    }
    current.push(item);
    size += len;
  }
  if (current.length) out.push(current);
  return out;
}

export interface AnalysisRun {
  result: AnalysisResult;
  /** Requests made: 1 when the transcript fit one request, else parts + merges (map-reduce). */
  requests: number;
  parts: number;
}

/**
 * Analyses a transcript in `language`. One request when it fits the context (OPENAI_CONTEXT_TOKENS
 * less the reply); otherwise map-reduce: each chunk is analysed on its own, then the partial
 * analyses are merged, in groups that fit, until one remains.
 */
export async function analyseTranscript(
  provider: AiProvider,
  transcript: string,
  opts: { language: string | null; speakerAware: boolean; signal?: AbortSignal },
): Promise<AnalysisRun> {
  const { language, speakerAware, signal } = opts;
  const ask = (system: string, user: string) =>
    provider.json<AnalysisResult>(
      [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      analysisResultSchema,
      signal,
    );
  const budget = provider.inputBudgetChars(partPrompt(language, speakerAware, 99, 99).length + 100);
  if (transcript.length <= budget) return { result: await ask(analysisPrompt(language, speakerAware), transcript), requests: 1, parts: 1 };
  const chunks = chunkText(transcript, budget);
  let requests = 0;
  let partials: AnalysisResult[] = [];
  for (const [i, chunk] of chunks.entries()) {
    partials.push(await ask(partPrompt(language, speakerAware, i + 1, chunks.length), chunk));
    requests++;
  }
  const mergeBudget = provider.inputBudgetChars(mergePrompt(language).length + 100);
  while (partials.length > 1) {
    const groups = batches(partials, mergeBudget);
    // A group of one cannot shrink by merging: the budget is too small for even two partials.
    if (groups.length === partials.length && partials.length > 1) {
      throw new AiProviderError('the context is too small to merge the partial analyses (raise OPENAI_CONTEXT_TOKENS)', null);
    }
    const merged: AnalysisResult[] = [];
    for (const group of groups) {
      if (group.length === 1) {
        merged.push(group[0]!);
        continue;
      }
      merged.push(await ask(mergePrompt(language), JSON.stringify(group.map((g, i) => ({ part: i + 1, ...g })))));
      requests++;
    }
    partials = merged;
  }
  return { result: partials[0]!, requests, parts: chunks.length };
}

/** The analysis as plain text (callback `analysis_text`): summary, then bulleted sections. */
export function analysisText(result: AnalysisResult | null | undefined): string | null {
  if (!result) return null;
  const section = (title: string, items: string[]) => (items.length ? `\n\n${title}:\n${items.map((i) => `- ${i}`).join('\n')}` : '');
  return `${result.summary}${section('Key points', result.key_points)}${section('Action items', result.action_items)}${
    result.topics.length ? `\n\nTopics: ${result.topics.join(', ')}` : ''
  }`;
}

const translationPrompt = (target: string, source: string | null) =>
  [
    'Task: translation',
    `Translate transcript segments from ${languageName(source)} into ${languageName(target)}.`,
    'The user message is a JSON object {"segments": [{"seq": number, "text": string}]}. Translate each text on its own, ' +
      'keep every seq, add and drop nothing. Reply with one JSON object and nothing else: {"segments": [{"seq": number, "text": string}]}.',
  ].join('\n');

const analysisTranslationPrompt = (target: string) =>
  [
    'Task: translate-analysis',
    `Translate every string value of the JSON object in the user message into ${languageName(target)}. Keep the keys and the structure.`,
    ANALYSIS_SHAPE,
  ].join('\n');

export interface TranslationRun {
  segments: Array<{ seq: number; text: string }>;
  text: string;
  analysis: AnalysisResult | null;
  requests: number;
}

/**
 * Translates a pass's segments into `target` in batches that fit both the context and one reply
 * (a translation is about as long as its source), then the analysis when there is one.
 */
export async function translateTranscript(
  provider: AiProvider,
  input: { segments: Array<{ seq: number; text: string }>; analysis: AnalysisResult | null; source: string | null; target: string; signal?: AbortSignal },
): Promise<TranslationRun> {
  const system = translationPrompt(input.target, input.source);
  const max = Math.min(provider.inputBudgetChars(system.length + 100), Math.floor(provider.outputBudgetChars() * 0.7));
  const out: Array<{ seq: number; text: string }> = [];
  let requests = 0;
  for (const batch of batches(
    input.segments.filter((s) => s.text.trim()),
    max,
  )) {
    const reply = await provider.json(
      [
        { role: 'system', content: system },
        { role: 'user', content: JSON.stringify({ segments: batch }) },
      ],
      segmentsReplySchema,
      input.signal,
    );
    requests++;
    const bySeq = new Map(reply.segments.map((s) => [s.seq, s.text]));
    const missing = batch.filter((s) => !bySeq.has(s.seq)).map((s) => s.seq);
    if (missing.length)
      throw new AiProviderError(`the translation left out segment${missing.length === 1 ? '' : 's'} ${missing.slice(0, 10).join(', ')}`, null);
    for (const s of batch) out.push({ seq: s.seq, text: bySeq.get(s.seq)!.trim() });
  }
  let analysis: AnalysisResult | null = null;
  if (input.analysis) {
    analysis = await provider.json(
      [{ role: 'system', content: analysisTranslationPrompt(input.target) } satisfies ChatMessage, { role: 'user', content: JSON.stringify(input.analysis) }],
      analysisResultSchema,
      input.signal,
    );
    requests++;
  }
  return {
    segments: out,
    text: out
      .map((s) => s.text)
      .filter(Boolean)
      .join(' '),
    analysis,
    requests,
  };
}

/** Longest title kept (source_label holds 300). */
export const MAX_TITLE_LENGTH = 120;

/** A short title from the start of the transcript (as much as fits one request). */
export async function suggestTitle(provider: AiProvider, transcript: string, language: string | null, signal?: AbortSignal): Promise<string> {
  const system = [
    'Task: title',
    `Give the recording whose transcript follows a short, specific title (at most 8 words) in ${languageName(language)}. ` +
      'No quotes, no trailing period, no date unless the transcript names one.',
    'Reply with one JSON object and nothing else: {"title": string}.',
  ].join('\n');
  const excerpt = transcript.slice(0, Math.min(provider.inputBudgetChars(system.length + 100), 12_000));
  const reply = await provider.json(
    [
      { role: 'system', content: system },
      { role: 'user', content: excerpt },
    ],
    titleSchema,
    signal,
  );
  const title = reply.title
    .replace(/\s+/g, ' ')
    .replace(/^["'“”‘’«»]+|["'“”‘’«»]+$/g, '')
    .replace(/\.$/, '')
    .trim();
  if (!title) throw new AiProviderError("the model's title is empty", null);
  return title.length > MAX_TITLE_LENGTH ? `${title.slice(0, MAX_TITLE_LENGTH - 1).trimEnd()}…` : title;
}
