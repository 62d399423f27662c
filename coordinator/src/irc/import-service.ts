import { createHash } from 'node:crypto';
import { open, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Orm } from '../db/orm.js';
import { AppError } from '../http/errors.js';
import { IRC_SOURCES, IrcEventStore, type IrcSource, type NewIrcEvent } from './event-store.js';
import { isChannelName, isValidDate } from './parsers/common.js';
import { detectFormat, formatByName, LOG_FORMAT_NAMES, type LogFormat } from './parsers/index.js';
import { ParseError, type FileNameInfo, type ParsedEvent, type ParsedFile } from './parsers/types.js';
import { assertTimeZone, formatUtc, localToUtcMs } from './time-zone.js';

export { IRC_SOURCES, type IrcSource } from './event-store.js';
/** `auto` detects each file's format from its first lines. */
export const IRC_IMPORT_FORMATS = ['auto', ...LOG_FORMAT_NAMES] as const;

export interface IrcImportOptions {
  network: string;
  source: IrcSource;
  /** A format name, or `auto` (the default) to detect each file's format. */
  format?: string;
  /** IANA zone the log times are in; default UTC. Lines that carry their own UTC offset keep it. */
  timeZone?: string;
  /** Channel (or query nick) for every file, for logs whose names do not carry one. */
  channel?: string;
  /** Day (`YYYY-MM-DD`) of the first line, for time-only logs whose names do not carry one. */
  date?: string;
  /** Rows per insert statement; default 1000. */
  batchSize?: number;
  /** Bytes of a file parsed and written at a time; default CHUNK_BYTES. */
  chunkBytes?: number;
}

export interface IrcImportCounts {
  files: number;
  /** Non-empty lines read. */
  lines: number;
  /** Rows added now. */
  inserted: number;
  /** Lines not added: already imported (same key) or not in a known shape. */
  skipped: number;
  /** Of `skipped`, lines that did not parse. */
  unparsed: number;
  /** Files read, per format. */
  formats: Record<string, number>;
  /** Files passed over, with why. */
  ignoredFiles: Array<{ path: string; reason: string }>;
}

/** Imports chat-log files into irc_networks / irc_channels / irc_events, idempotently. */
export class IrcImportService {
  readonly store: IrcEventStore;
  constructor(orm: Orm) {
    this.store = new IrcEventStore(orm);
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
    const zone = opts.timeZone ?? 'UTC';
    try {
      assertTimeZone(zone);
    } catch (err) {
      throw new AppError('validation_failed', (err as Error).message);
    }
    const files = await collectFiles(paths);
    const counts: IrcImportCounts = { files: 0, lines: 0, inserted: 0, skipped: 0, unparsed: 0, formats: {}, ignoredFiles: [] };
    const networkId = await this.store.ensureNetwork(opts.source, network);
    const channelIds = new Map<string, number>();
    for (const file of files) await this.importFile(file, { networkId, channelIds, counts, forced, zone, opts });
    return counts;
  }

  /**
   * One file, in chunks of about CHUNK_BYTES cut at line ends, each parsed and written in its own
   * transaction, so memory stays flat for multi-year single-file logs (irssi, WeeChat, HexChat) and
   * an interrupted import resumes where it stopped. Each chunk starts on the day the previous one
   * ended on; a netsplit burst that straddles a cut is stored as two bursts.
   */
  private async importFile(
    file: string,
    c: {
      networkId: number;
      channelIds: Map<string, number>;
      counts: IrcImportCounts;
      forced: LogFormat | null | undefined;
      zone: string;
      opts: IrcImportOptions;
    },
  ): Promise<void> {
    const { counts, opts } = c;
    let format: LogFormat | null = c.forced ?? null;
    let named: FileNameInfo | null = null;
    let date: string | null = null;
    let time: string | null = null;
    let channel: string | null = null;
    let channelId = 0;
    const seen = new Map<string, number>();
    let first = true;
    for await (const chunk of readChunks(file, opts.chunkBytes ?? CHUNK_BYTES)) {
      if (first) {
        format ??= detectFormat(file, chunk);
        if (!format) {
          counts.ignoredFiles.push({ path: file, reason: `not a known chat-log format (${LOG_FORMAT_NAMES.join(', ')})` });
          return;
        }
        named = format.parseFileName(file);
        date = opts.date ?? named?.date ?? null;
      }
      let parsed: ParsedFile;
      try {
        parsed = format!.parse(chunk, { date, time });
      } catch (err) {
        if (!(err instanceof ParseError)) throw err;
        counts.ignoredFiles.push({ path: file, reason: `${err.message} (${format!.name})${first ? '' : '; the lines before were imported'}` });
        return;
      }
      if (first) {
        channel = opts.channel ?? named?.channel ?? parsed.channel;
        if (!channel) {
          counts.ignoredFiles.push({ path: file, reason: `the ${format!.name} file name does not say which channel; pass --channel` });
          return;
        }
        const known = c.channelIds.get(channel);
        channelId = known ?? (await this.store.ensureChannel(c.networkId, channel));
        c.channelIds.set(channel, channelId);
        counts.files += 1;
        counts.formats[format!.name] = (counts.formats[format!.name] ?? 0) + 1;
        first = false;
      }
      const rows = toRows(channel!, parsed.events, c.zone, seen);
      const inserted = await this.store.insert(c.networkId, channelId, rows, { batchSize: opts.batchSize ?? 1000 });
      counts.lines += parsed.lines;
      counts.inserted += inserted;
      counts.unparsed += parsed.unparsed.length;
      counts.skipped += parsed.lines - inserted;
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
}

/**
 * Parsed events → rows. The idempotency key is the channel, the line's local time, its raw bytes
 * and how many identical (time, bytes) lines came before it in the file: the same line imported
 * again, from the same file or from a copy or a longer version of it, gets the same key.
 */
export function toRows(channel: string, events: ParsedEvent[], zone: string, seen = new Map<string, number>()): NewIrcEvent[] {
  const channelKey = channel.toLowerCase();
  const isPrivate = !isChannelName(channel);
  const leaders = new Map<number, ParsedEvent>();
  for (const e of events) if (e.netsplitBurst !== null && e.netsplitBurst === e.lineNo) leaders.set(e.lineNo, e);
  return events.map((e) => {
    const stamp = stampOf(e);
    const dupKey = `${stamp}\n${e.raw.toString('latin1')}`;
    const occurrence = seen.get(dupKey) ?? 0;
    seen.set(dupKey, occurrence + 1);
    const utcMs = e.utcOffsetMinutes === null ? localToUtcMs(e.localTime, zone) : wallMs(e.localTime) - e.utcOffsetMinutes * 60_000;
    const leader = e.netsplitBurst === null ? undefined : leaders.get(e.netsplitBurst);
    let target = e.target;
    if (isPrivate && !target && e.nick?.toLowerCase() !== channelKey) target = channel;
    return {
      eventType: e.eventType,
      occurredAt: formatUtc(utcMs),
      nick: e.nick,
      messageText: e.messageText,
      target,
      toNick: e.toNick,
      netsplitGroup: leader ? netsplitGroupId(channelKey, leader.localTime, leader.raw) : null,
      netsplitLeader: leader !== undefined && leader === e,
      lineHash: lineHash(channelKey, stamp, occurrence, e.raw),
    };
  });
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

async function collectFiles(paths: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of paths) {
    const info = await stat(p).catch(() => null);
    if (!info) throw new AppError('not_found', `no such file or folder: ${p}`);
    if (info.isDirectory()) {
      const entries = (await readdir(p, { withFileTypes: true }))
        .filter((e) => (e.isDirectory() || e.isFile()) && !e.name.startsWith('.') && !/\.(md|gz|zip|bz2|xz)$/i.test(e.name))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      out.push(...(await collectFiles(entries.map((e) => path.join(p, e.name)))));
    } else if (info.isFile()) out.push(p);
  }
  return out;
}
