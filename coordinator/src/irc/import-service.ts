import { createHash } from 'node:crypto';
import { open, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Orm } from '../db/orm.js';
import { AppError } from '../http/errors.js';
import { IrcCommonTerms } from './common-terms.js';
import { IRC_SOURCES, IrcEventStore, type IrcSource, type NewIrcEvent } from './event-store.js';
import { ARCHIVE_RANGE_TEXT, isArchiveInstant } from './archive-dates.js';
import { decodeLine, isChannelName, isValidDate, sampleLines, stripControls } from './parsers/common.js';
import { DETECT_THRESHOLD, detectFormat, detectFormatFromLines, formatByName, LOG_FORMAT_NAMES, type LogFormat } from './parsers/index.js';
import { compilePathPattern, matchCommonLayout, type PathPattern } from './path-layout.js';
import { ParseError, type FileNameInfo, type ParsedEvent, type ParsedFile } from './parsers/types.js';
import { assertTimeZone, formatUtc, localToUtcMs } from './time-zone.js';

export { IRC_SOURCES, type IrcSource } from './event-store.js';
/** `auto` detects the format once per channel from the first lines of a sample of its files. */
export const IRC_IMPORT_FORMATS = ['auto', ...LOG_FORMAT_NAMES] as const;

export interface IrcImportOptions {
  network: string;
  source: IrcSource;
  /** A format name, or `auto` (the default): detected once per channel from a sample of its files. */
  format?: string;
  /** IANA zone the log times are in; default UTC. Lines that carry their own UTC offset keep it. */
  timeZone?: string;
  /** Channel (or query nick) for every file, for logs whose paths do not carry one. */
  channel?: string;
  /** Day (`YYYY-MM-DD`) of the first line of the one file imported, for a time-only log whose path does not carry one. */
  date?: string;
  /** Where channel and day lie in the paths, e.g. `{channel}/{yyyy}/{mm}/{dd}.log` (see path-layout.ts). */
  pathPattern?: string;
  /** Parse everything and count what would be stored, writing nothing. */
  dryRun?: boolean;
  /** Lines no parser understands that are tolerated before the import counts as incomplete; default 0. */
  maxUnparsed?: number;
  /** Count unparsed lines (they are still listed) but never as a reason the import is incomplete. */
  allowUnparsed?: boolean;
  /** Rows per insert statement; default 1000. */
  batchSize?: number;
  /** How many channels are imported at the same time (default IMPORT_CONCURRENCY). */
  concurrency?: number;
  /** Bytes of a file parsed and written at a time; default CHUNK_BYTES. */
  chunkBytes?: number;
}

/** Lines of one file that no parser understood (at most UNPARSED_LISTED of them listed). */
export interface UnparsedFile {
  path: string;
  count: number;
  lines: Array<{ lineNo: number; text: string }>;
}

/** How a channel's files were read: the format chosen once for the channel, and what each file alone looked like. */
export interface ChannelDetection {
  /** The channel the paths name; for files whose path names none, the folder they lie in (`kind: 'folder'`). */
  channel: string;
  kind: 'channel' | 'folder';
  format: string | null;
  files: number;
  /** Per-file detection (first lines of each file alone), per format name; `none` for files no format fits. */
  detected: Record<string, number>;
}

export interface IrcImportCounts {
  files: number;
  /** Non-empty lines read. */
  lines: number;
  /** Rows added now (with dryRun: rows that would be added). */
  inserted: number;
  /** Lines not added: already imported (same key) or not in a known shape. */
  skipped: number;
  /** Of `skipped`, lines that did not parse. */
  unparsed: number;
  /** Of `skipped`, lines already stored (same key) or repeated in this run: nothing lost. */
  duplicates: number;
  /** Of `skipped`, lines dated outside the archive's days (see archive-dates.ts): not stored, listed in outOfRangeFiles. */
  outOfRange: number;
  /** Lines stored without the control characters they held (NUL, BEL, ESC, …; see stripControls), listed in controlFiles. */
  controlLines: number;
  /** Files read, per format. */
  formats: Record<string, number>;
  /** Files passed over, with why. */
  ignoredFiles: Array<{ path: string; reason: string }>;
  /** Of `ignoredFiles`, those whose lines fit no format (not chat logs, or a format not supported). */
  notLogs: number;
  /** The batch every added row carries (irc:imports, irc:import:revert); null for a dry run. */
  batchId: number | null;
  dryRun: boolean;
  channels: ChannelDetection[];
  /** Files with lines no parser understood, with line numbers. */
  unparsedFiles: UnparsedFile[];
  /** Files with lines dated outside the archive's days, with line numbers. */
  outOfRangeFiles: UnparsedFile[];
  /** Files with lines whose control characters were removed, with line numbers. */
  controlFiles: UnparsedFile[];
  /** Things worth knowing that did not lose data (mixed detections). */
  warnings: string[];
  /** Frequent and common terms (irc:common-terms) that changed place after the import; null when it added no rows. */
  commonTerms: { changed: number; rebuilt: boolean } | null;
  /** Why the import is incomplete: files not imported, unparsed lines over the limit. The CLI exits non-zero when there are any. */
  problems: string[];
}

/** Unparsed lines listed per file in the report (all of them are counted). */
export const UNPARSED_LISTED = 50;
/** Files of a channel whose first lines make up its detection sample (spread over the channel's files). */
export const DETECT_SAMPLE_FILES = 40;
const HEAD_BYTES = 64 * 1024;
/**
 * Channels imported at the same time: two keep two PostgreSQL backends busy while the parser of
 * each waits for its inserts (measured in bench/: about 1.4× the lines per second of one).
 */
const IMPORT_CONCURRENCY = 2;

interface FilePlan {
  file: string;
  /** The channel (or folder) the file belongs to: files of one channel are imported in order, one at a time. */
  group: string;
  head: Buffer;
  /** This file's own detection. */
  own: LogFormat | null;
  /** The format it is read with. */
  format: LogFormat | null;
  named: FileNameInfo | null;
}

/** Imports chat-log files into irc_networks / irc_channels / irc_events, idempotently. */
export class IrcImportService {
  readonly store: IrcEventStore;
  private readonly commonTerms: IrcCommonTerms;
  constructor(orm: Orm) {
    this.store = new IrcEventStore(orm);
    this.commonTerms = new IrcCommonTerms(orm);
  }

  /** `paths` may be files or folders (walked recursively, in name order). */
  async importPaths(paths: string[], opts: IrcImportOptions): Promise<IrcImportCounts> {
    const formatName = opts.format ?? 'auto';
    const forced = formatName === 'auto' ? null : formatByName(formatName);
    if (formatName !== 'auto' && !forced) {
      throw new AppError('validation_failed', `unknown log format "${formatName}"; formats: ${IRC_IMPORT_FORMATS.join(', ')}`);
    }
    if (!(IRC_SOURCES as readonly string[]).includes(opts.source)) {
      throw new AppError('validation_failed', `unknown source "${opts.source}"; sources: ${IRC_SOURCES.join(', ')}`);
    }
    const network = opts.network.trim();
    if (!network) throw new AppError('validation_failed', 'network name is empty');
    if (opts.date !== undefined && !isValidDate(opts.date)) throw new AppError('validation_failed', `date "${opts.date}" is not a day (YYYY-MM-DD)`);
    if (opts.channel !== undefined && !/^\S{1,255}$/.test(opts.channel))
      throw new AppError('validation_failed', `channel "${opts.channel}" is not a channel or nick name`);
    let pattern: PathPattern | null = null;
    if (opts.pathPattern !== undefined) {
      try {
        pattern = compilePathPattern(opts.pathPattern);
      } catch (err) {
        throw new AppError('validation_failed', `path: ${(err as Error).message}`);
      }
    }
    const zone = opts.timeZone ?? 'UTC';
    try {
      assertTimeZone(zone);
    } catch (err) {
      throw new AppError('validation_failed', (err as Error).message);
    }
    const { files, skipped } = await collectFiles(paths);
    if (opts.date !== undefined && files.length > 1) {
      throw new AppError(
        'validation_failed',
        `--date gives the day of one file, but ${files.length} files were given; let the paths give each file's day (--path '{channel}/{yyyy}/{mm}/{dd}.log' or similar)`,
      );
    }
    const dryRun = opts.dryRun ?? false;
    const counts: IrcImportCounts = {
      files: 0,
      lines: 0,
      inserted: 0,
      skipped: 0,
      unparsed: 0,
      duplicates: 0,
      outOfRange: 0,
      controlLines: 0,
      formats: {},
      ignoredFiles: [...skipped],
      notLogs: skipped.filter((f) => f.notLog).length,
      batchId: null,
      dryRun,
      channels: [],
      unparsedFiles: [],
      outOfRangeFiles: [],
      controlFiles: [],
      warnings: [],
      commonTerms: null,
      problems: [],
    };
    const plans = await this.plan(files, { forced: forced ?? null, pattern, opts, counts });
    const networkId = dryRun ? await this.store.findNetwork(opts.source, network) : await this.store.ensureNetwork(opts.source, network);
    if (!dryRun) {
      counts.batchId = await this.store.startBatch(
        networkId!,
        paths.map((p) => path.resolve(p)),
        {
          format: formatName,
          tz: zone,
          ...(opts.channel !== undefined ? { channel: opts.channel } : {}),
          ...(opts.date !== undefined ? { date: opts.date } : {}),
          ...(opts.pathPattern !== undefined ? { path: opts.pathPattern } : {}),
        },
      );
    }
    const channelIds = new Map<string, number | null>();
    const dryRunKeys = new Map<string, Set<string>>();
    // Channels are imported side by side (each channel's files in order, one at a time): a
    // channel's rows, counters and term counts are its own, so two channels' transactions share
    // only the network's nick rows, which every writer updates in one order.
    const byGroup = new Map<string, FilePlan[]>();
    for (const plan of plans) (byGroup.get(plan.group) ?? byGroup.set(plan.group, []).get(plan.group)!).push(plan);
    const queue = [...byGroup.values()];
    const lane = async () => {
      for (let group = queue.shift(); group; group = queue.shift())
        for (const plan of group) await this.importFile(plan, { networkId, channelIds, dryRunKeys, counts, zone, opts, pattern });
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(opts.concurrency ?? IMPORT_CONCURRENCY, queue.length)) }, lane));
    // Lanes finish files in any order; reports list them by path.
    counts.ignoredFiles.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    for (const list of [counts.unparsedFiles, counts.outOfRangeFiles, counts.controlFiles])
      list.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    counts.ignoredFiles = counts.ignoredFiles.map((f) => ({ path: f.path, reason: f.reason }));
    if (counts.batchId !== null) await this.store.finishBatch(counts.batchId, counts);
    // New rows may have changed which words are the archive's most common ones.
    if (counts.inserted > 0 && !dryRun) {
      const change = await this.commonTerms.refresh();
      counts.commonTerms = { changed: change.changed, rebuilt: change.rebuilt };
    }

    // Files that look like logs but could not be read (no channel or day, not fitting --path,
    // compressed) are lost data; files no format fits are listed but are usually not logs at all.
    const lost = counts.ignoredFiles.length - counts.notLogs;
    if (lost) counts.problems.push(`${lost} log file(s) not imported (see ignoredFiles)`);
    else if (files.length && !counts.files) counts.problems.push(`none of the ${files.length} file(s) is a chat log this importer reads`);
    if (counts.outOfRange) {
      counts.problems.push(
        `${counts.outOfRange} line(s) in ${counts.outOfRangeFiles.length} file(s) are dated outside the archive's days (${ARCHIVE_RANGE_TEXT}) and were not imported; they are listed per file`,
      );
    }
    const maxUnparsed = opts.maxUnparsed ?? 0;
    if (counts.unparsed > maxUnparsed && !opts.allowUnparsed) {
      counts.problems.push(
        `${counts.unparsed} line(s) in ${counts.unparsedFiles.length} file(s) match no parser (more than the ${maxUnparsed} allowed); they are listed per file; pass --allow-unparsed to accept that`,
      );
    }
    return counts;
  }

  /**
   * Chooses each file's format: files are grouped by channel (as their paths name it), and each
   * channel's format is detected once from the first lines of a sample of its files put
   * together. A file the channel's format does not fit (its lines are another format's) keeps
   * its own detection. Per-file detections that disagree are reported.
   */
  private async plan(
    files: string[],
    c: { forced: LogFormat | null; pattern: PathPattern | null; opts: IrcImportOptions; counts: IrcImportCounts },
  ): Promise<FilePlan[]> {
    const groups = new Map<string, FilePlan[]>();
    const plans: FilePlan[] = [];
    for (const file of files) {
      const head = await readHead(file, HEAD_BYTES);
      const own = detectFormat(file, head);
      const named = pathInfo(file, own, c.pattern);
      const key = (c.opts.channel ?? named?.channel ?? `folder:${path.dirname(file)}`).toLowerCase();
      const plan: FilePlan = { file, group: key, head, own, format: c.forced ?? own, named };
      plans.push(plan);
      const g = groups.get(key);
      if (g) g.push(plan);
      else groups.set(key, [plan]);
    }
    for (const [key, group] of groups) {
      const detected: Record<string, number> = {};
      for (const p of group) detected[p.own?.name ?? 'none'] = (detected[p.own?.name ?? 'none'] ?? 0) + 1;
      let chosen: LogFormat | null = c.forced;
      if (!c.forced) {
        const step = Math.max(1, group.length / DETECT_SAMPLE_FILES);
        const sample: string[] = [];
        for (let i = 0; i < group.length; i += step) sample.push(...sampleLines(group[Math.floor(i)]!.head));
        chosen = detectFormatFromLines(sample, group[0]!.file);
        for (const p of group) {
          // The channel's format, unless this file's own lines do not fit it but fit another format.
          // A file whose lines fit no format at all (a script or notes beside the logs) is not a
          // log, whether it was grouped by --channel, by --path or by its folder: it is listed as
          // "not a known chat-log format", never read as the channel's format line by line. An
          // empty file, or one with some lines of the channel's format, is still read as it.
          const lines = sampleLines(p.head);
          const fit = chosen ? chosen.detect(lines) : 0;
          p.format = fit > DETECT_THRESHOLD ? chosen : (p.own ?? (fit > 0 || lines.length === 0 ? chosen : null));
          if (p.format) p.named = pathInfo(p.file, p.format, c.pattern);
        }
      }
      const folder = key.startsWith('folder:');
      const label = folder ? path.dirname(group[0]!.file) : (group[0]!.named?.channel ?? c.opts.channel ?? key);
      c.counts.channels.push({ channel: label, kind: folder ? 'folder' : 'channel', format: chosen?.name ?? null, files: group.length, detected });
      const names = Object.keys(detected).filter((n) => n !== 'none');
      if (!c.forced && names.length > 1) {
        const parts = Object.entries(detected)
          .sort((a, b) => b[1] - a[1])
          .map(([n, k]) => `${n} ${k}`)
          .join(', ');
        const kept = group.filter((p) => p.format !== chosen).length;
        c.counts.warnings.push(
          `${label}: files alone look like different formats (${parts}); read as ${chosen?.name ?? 'each its own'}` +
            `${kept ? ` except ${kept} file(s) whose lines fit only their own format` : ''} (pin one with --format)`,
        );
      }
    }
    return plans;
  }

  /**
   * One file, in chunks of about CHUNK_BYTES cut at line ends, each parsed and written in its own
   * transaction, so memory stays flat for multi-year single-file logs (irssi, WeeChat, HexChat) and
   * an interrupted import resumes where it stopped. Each chunk starts on the day the previous one
   * ended on; a netsplit burst that straddles a cut is stored as two bursts.
   */
  private async importFile(
    plan: FilePlan,
    c: {
      networkId: number | null;
      channelIds: Map<string, number | null>;
      dryRunKeys: Map<string, Set<string>>;
      counts: IrcImportCounts;
      zone: string;
      opts: IrcImportOptions;
      pattern: PathPattern | null;
    },
  ): Promise<void> {
    const { counts, opts } = c;
    const { file, format } = plan;
    if (!format) {
      counts.ignoredFiles.push({ path: file, reason: `not a known chat-log format (${LOG_FORMAT_NAMES.join(', ')})` });
      counts.notLogs += 1;
      return;
    }
    if (c.pattern && !plan.named) {
      counts.ignoredFiles.push({ path: file, reason: `the path does not fit --path '${c.pattern.pattern}'` });
      return;
    }
    const named = plan.named;
    let date: string | null = opts.date ?? named?.date ?? null;
    let time: string | null = null;
    let channel: string | null = null;
    let channelId: number | null = null;
    const seen = new Map<string, number>();
    let unparsedEntry: UnparsedFile | null = null;
    // Line numbers restart in each chunk; this many lines came before it.
    let lineBase = 0;
    let first = true;
    for await (const chunk of readChunks(file, opts.chunkBytes ?? CHUNK_BYTES)) {
      let parsed: ParsedFile;
      try {
        parsed = format.parse(chunk, { date, time });
      } catch (err) {
        if (!(err instanceof ParseError)) throw err;
        const hint = first ? "; the path gives no day: pass --path (e.g. '{channel}/{yyyy}/{mm}/{dd}.log')" : '; the lines before were imported';
        counts.ignoredFiles.push({ path: file, reason: `${err.message} (${format.name})${hint}` });
        return;
      }
      if (first) {
        channel = opts.channel ?? named?.channel ?? parsed.channel;
        if (!channel) {
          counts.ignoredFiles.push({
            path: file,
            reason: `the path does not say which channel (${format.name}); pass --channel, or --path with {channel}`,
          });
          return;
        }
        if (c.channelIds.has(channel)) channelId = c.channelIds.get(channel)!;
        else {
          channelId = opts.dryRun
            ? c.networkId === null
              ? null
              : await this.store.findChannel(c.networkId, channel)
            : await this.store.ensureChannel(c.networkId!, channel);
          c.channelIds.set(channel, channelId);
        }
        counts.files += 1;
        counts.formats[format.name] = (counts.formats[format.name] ?? 0) + 1;
        first = false;
      }
      const notes: RowNotes = { outOfRange: [], controls: [] };
      const rows = toRows(channel!, parsed.events, c.zone, seen, notes);
      let inserted: number;
      try {
        inserted = opts.dryRun
          ? await this.countNew(channelId, channel!.toLowerCase(), rows, c.dryRunKeys)
          : await this.store.insert(c.networkId!, channelId!, rows, { batchSize: opts.batchSize ?? 1000, importBatchId: counts.batchId });
      } catch (err) {
        // Name the file and its lines: a database error alone does not say where to look.
        const at = parsed.events.length ? ` lines ${parsed.events[0]!.lineNo + lineBase}–${parsed.events.at(-1)!.lineNo + lineBase}` : '';
        (err as Error).message = `${file}${at}: ${(err as Error).message}`;
        throw err;
      }
      counts.lines += parsed.lines;
      counts.inserted += inserted;
      counts.unparsed += parsed.unparsed.length;
      counts.skipped += parsed.lines - inserted;
      counts.duplicates += rows.length - inserted;
      counts.outOfRange += notes.outOfRange.length;
      counts.controlLines += notes.controls.length;
      listLines(counts.outOfRangeFiles, file, notes.outOfRange, lineBase);
      listLines(counts.controlFiles, file, notes.controls, lineBase);
      if (parsed.unparsed.length) {
        if (!unparsedEntry) {
          unparsedEntry = { path: file, count: 0, lines: [] };
          counts.unparsedFiles.push(unparsedEntry);
        }
        unparsedEntry.count += parsed.unparsed.length;
        for (const u of parsed.unparsed) {
          if (unparsedEntry.lines.length >= UNPARSED_LISTED) break;
          unparsedEntry.lines.push({ lineNo: u.lineNo + lineBase, text: shown(u.text) });
        }
      }
      for (let i = chunk.indexOf(0x0a); i >= 0; i = chunk.indexOf(0x0a, i + 1)) lineBase += 1;
      const last = parsed.events.at(-1);
      if (last) {
        date = last.localTime.slice(0, 10);
        time = last.localTime.slice(11, 19);
        // Only lines with the last time stamp can repeat across the cut; forget the others.
        const stamp = stampOf(last);
        for (const key of seen.keys()) if (!key.startsWith(`${stamp}\n`)) seen.delete(key);
      }
    }
  }

  /** Dry run: how many of these rows are not stored yet (nor counted earlier in this run). */
  private async countNew(channelId: number | null, channelKey: string, rows: NewIrcEvent[], runKeys: Map<string, Set<string>>): Promise<number> {
    let keys = runKeys.get(channelKey);
    if (!keys) runKeys.set(channelKey, (keys = new Set()));
    const stored =
      channelId === null
        ? new Set<string>()
        : await this.store.storedHashes(
            channelId,
            rows.map((r) => r.lineHash),
          );
    let n = 0;
    for (const r of rows) {
      const hex = r.lineHash.toString('hex');
      if (stored.has(hex) || keys.has(hex)) continue;
      keys.add(hex);
      n += 1;
    }
    return n;
  }
}

/**
 * Channel and day of a file from its path: the `--path` pattern when given (nothing else), else
 * the format's own file naming, else a common layout (`#chan/YYYY/MM/DD.log`, `YYYY/MM/DD.log`, …).
 */
export function pathInfo(file: string, format: LogFormat | null, pattern: PathPattern | null): FileNameInfo | null {
  if (pattern) return pattern.match(path.resolve(file));
  const own = format?.parseFileName(file) ?? null;
  // A folder named by a number is a month or a year of a dated layout, not a channel.
  if (own && !(own.channel !== null && /^\d+$/.test(own.channel))) return own;
  const layout = matchCommonLayout(path.resolve(file));
  if (layout) return { channel: layout.channel, date: layout.date };
  return own ? { channel: null, date: own.date } : null;
}

/**
 * Parsed events → rows. The idempotency key is the channel, the line's local time, its raw bytes
 * and how many identical (time, bytes) lines came before it in the file: the same line imported
 * again, from the same file or from a copy or a longer version of it, gets the same key.
 */
export function toRows(channel: string, events: ParsedEvent[], zone: string, seen = new Map<string, number>(), notes?: RowNotes): NewIrcEvent[] {
  const channelKey = channel.toLowerCase();
  const isPrivate = !isChannelName(channel);
  const leaders = new Map<number, ParsedEvent>();
  for (const e of events) if (e.netsplitBurst !== null && e.netsplitBurst === e.lineNo) leaders.set(e.lineNo, e);
  const rows: NewIrcEvent[] = [];
  for (const e of events) {
    const stamp = stampOf(e);
    const dupKey = `${stamp}\n${e.raw.toString('latin1')}`;
    const occurrence = seen.get(dupKey) ?? 0;
    seen.set(dupKey, occurrence + 1);
    const utcMs = e.utcOffsetMinutes === null ? localToUtcMs(e.localTime, zone) : wallMs(e.localTime) - e.utcOffsetMinutes * 60_000;
    if (!isArchiveInstant(utcMs)) {
      notes?.outOfRange.push(e);
      continue;
    }
    const leader = e.netsplitBurst === null ? undefined : leaders.get(e.netsplitBurst);
    let removed = 0;
    const clean = (v: string | null) => {
      if (v === null) return null;
      const r = stripControls(v);
      removed += r.removed;
      return r.text;
    };
    const nick = clean(e.nick);
    const messageText = clean(e.messageText);
    let target = clean(e.target);
    const toNick = clean(e.toNick);
    if (removed) notes?.controls.push(e);
    if (isPrivate && !target && nick?.toLowerCase() !== channelKey) target = channel;
    rows.push({
      eventType: e.eventType,
      occurredAt: formatUtc(utcMs),
      nick,
      messageText,
      target,
      toNick,
      netsplitGroup: leader ? netsplitGroupId(channelKey, leader.localTime, leader.raw) : null,
      netsplitLeader: leader !== undefined && leader === e,
      lineHash: lineHash(channelKey, stamp, occurrence, e.raw),
    });
  }
  return rows;
}

/** What toRows left out or changed, per parsed line: dated outside the archive's days, control characters removed. */
export interface RowNotes {
  outOfRange: ParsedEvent[];
  controls: ParsedEvent[];
}

/** Report text of a line: at most 200 characters, control characters shown as `\xNN` (a report is JSON in PostgreSQL, which holds no NUL). */
function shown(text: string): string {
  // eslint-disable-next-line no-control-regex -- the control characters are what is made visible
  const t = text.replace(/[\x00-\x08\x0a-\x1f\x7f]/g, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return t.length > 200 ? `${t.slice(0, 200)}…` : t;
}

/** Adds lines of `file` to its entry of `list` (made when missing), listing at most UNPARSED_LISTED. */
function listLines(list: UnparsedFile[], file: string, events: ParsedEvent[], lineBase: number): void {
  if (!events.length) return;
  let entry = list.find((f) => f.path === file);
  if (!entry) list.push((entry = { path: file, count: 0, lines: [] }));
  entry.count += events.length;
  for (const e of events) {
    if (entry.lines.length >= UNPARSED_LISTED) break;
    entry.lines.push({ lineNo: e.lineNo + lineBase, text: shown(decodeLine(e.raw)) });
  }
}

const wallMs = (local: string) => Date.parse(`${local.replace(' ', 'T')}Z`);
const offsetSuffix = (min: number) =>
  `${min < 0 ? '-' : '+'}${String(Math.floor(Math.abs(min) / 60)).padStart(2, '0')}:${String(Math.abs(min) % 60).padStart(2, '0')}`;

/** The local time as the key sees it: with the line's own UTC offset where it carries one. */
const stampOf = (e: ParsedEvent) => (e.utcOffsetMinutes === null ? e.localTime : `${e.localTime}${offsetSuffix(e.utcOffsetMinutes)}`);

/** sha256 over the channel (lower case), the local time stamp, the occurrence number and the raw bytes. */
export function lineHash(channelKey: string, stamp: string, occurrence: number, raw: Buffer): Buffer {
  return createHash('sha256').update(`${channelKey}\n${stamp}\n${occurrence}\n`).update(raw).digest();
}

/** A stable positive 63-bit id for a netsplit burst (same on every re-import), as a decimal string. */
export function netsplitGroupId(channelKey: string, firstLocalTime: string, firstRaw: Buffer): string {
  const h = createHash('sha256').update(`netsplit\n${channelKey}\n${firstLocalTime}\n`).update(firstRaw).digest();
  return (h.readBigUInt64BE(0) & 0x7fffffffffffffffn).toString();
}

/** About this many bytes of a file are parsed and written at a time. */
export const CHUNK_BYTES = 4 * 1024 * 1024;

/** A file's bytes in pieces of about `size` bytes, each ending at a line end (a longer line makes a longer piece). */
export async function* readChunks(file: string, size: number): AsyncGenerator<Buffer> {
  const fh = await open(file, 'r');
  try {
    let carry: Buffer = Buffer.alloc(0);
    for (;;) {
      const buf = Buffer.allocUnsafe(size);
      const { bytesRead } = await fh.read(buf, 0, size, null);
      if (bytesRead === 0) break;
      const data = carry.length ? Buffer.concat([carry, buf.subarray(0, bytesRead)]) : buf.subarray(0, bytesRead);
      const cut = data.lastIndexOf(0x0a);
      if (cut < 0) {
        carry = Buffer.from(data);
        continue;
      }
      carry = Buffer.from(data.subarray(cut + 1));
      yield data.subarray(0, cut + 1);
    }
    if (carry.length) yield carry;
  } finally {
    await fh.close();
  }
}

/** The first `size` bytes of a file (its detection sample). */
async function readHead(file: string, size: number): Promise<Buffer> {
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.alloc(size);
    const { bytesRead } = await fh.read(buf, 0, size, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/**
 * Files under `paths` in name order. Hidden entries are passed over silently; Markdown notes
 * (`README.md`) are listed as not logs; compressed files are reported (they may be logs:
 * decompress them first).
 */
async function collectFiles(paths: string[]): Promise<{ files: string[]; skipped: Array<{ path: string; reason: string; notLog?: boolean }> }> {
  const files: string[] = [];
  const skipped: Array<{ path: string; reason: string; notLog?: boolean }> = [];
  const walk = async (list: string[]) => {
    for (const p of list) {
      const info = await stat(p).catch(() => null);
      if (!info) throw new AppError('not_found', `no such file or folder: ${p}`);
      if (info.isDirectory()) {
        const entries = (await readdir(p, { withFileTypes: true }))
          .filter((e) => (e.isDirectory() || e.isFile()) && !e.name.startsWith('.'))
          .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        for (const e of entries) {
          const full = path.join(p, e.name);
          if (e.isFile() && /\.md$/i.test(e.name)) skipped.push({ path: full, reason: 'Markdown notes, not a chat log', notLog: true });
          else if (e.isFile() && /\.(gz|zip|bz2|xz|zst|7z)$/i.test(e.name)) skipped.push({ path: full, reason: 'compressed; decompress it first' });
          else await walk([full]);
        }
      } else if (info.isFile()) files.push(p);
    }
  };
  await walk(paths);
  return { files, skipped };
}
