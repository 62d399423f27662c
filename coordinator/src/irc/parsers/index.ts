/**
 * The chat-log formats the importer reads, and detection of a file's format from its first lines
 * (and its name, to break ties between formats whose lines look alike).
 */
import { sampleLines } from './common.js';
import { energymechFormat } from './energymech.js';
import { hexchatFormat } from './hexchat.js';
import { irssiFormat } from './irssi.js';
import { limnoriaFormat } from './limnoria.js';
import type { LogFormat } from './types.js';
import { weechatFormat } from './weechat.js';
import { zncFormat } from './znc.js';

export const LOG_FORMATS: readonly LogFormat[] = [zncFormat, irssiFormat, weechatFormat, limnoriaFormat, hexchatFormat, energymechFormat];

/**
 * The order detection tries formats in; among equal scores (after the file-name tie-break) the
 * earlier wins. EnergyMech goes before ZNC: both read most of each other's lines, and EnergyMech's
 * detect gives its full score only when the sample shows an EnergyMech-only line shape (else a
 * little less than ZNC's), so a tie means the EnergyMech shapes are there.
 */
const DETECT_ORDER: readonly LogFormat[] = [energymechFormat, ...LOG_FORMATS.filter((f) => f !== energymechFormat)];

export const LOG_FORMAT_NAMES = LOG_FORMATS.map((f) => f.name);

export function formatByName(name: string): LogFormat | undefined {
  return LOG_FORMATS.find((f) => f.name === name);
}

/** Detection needs more than half of the sampled lines to fit a format. */
export const DETECT_THRESHOLD = 0.5;

/**
 * The format whose line shapes fit the file's first lines best; among equal scores, the one whose
 * file naming matches, then the earlier in DETECT_ORDER. Null when no format fits more than half of the lines.
 */
export function detectFormat(filePath: string, content: Buffer): LogFormat | null {
  return detectFormatFromLines(sampleLines(content), filePath);
}

/**
 * detectFormat over decoded lines, which may be the first lines of several files of one channel
 * put together (so a day whose first lines happen to look like another dialect does not decide
 * alone); `namingPath` breaks ties by file naming.
 */
export function detectFormatFromLines(lines: string[], namingPath: string): LogFormat | null {
  if (!lines.length) return null;
  let best: { format: LogFormat; score: number } | null = null;
  for (const format of DETECT_ORDER) {
    const score = format.detect(lines) + (format.parseFileName(namingPath) ? 0.001 : 0);
    if (score > DETECT_THRESHOLD && (!best || score > best.score)) best = { format, score };
  }
  return best?.format ?? null;
}

export type { LogFormat } from './types.js';
