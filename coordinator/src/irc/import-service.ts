import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Orm } from '../db/orm.js';
import { AppError } from '../http/errors.js';
import { parseLogFileName, parseZncLog, type ParsedEvent } from './parsers/znc.js';
import { assertTimeZone, formatUtc, localToUtcMs } from './time-zone.js';

export const IRC_SOURCES = ['production', 'sandbox'] as const;
export type IrcSource = (typeof IRC_SOURCES)[number];
export const IRC_IMPORT_FORMATS = ['znc'] as const;
export type IrcImportFormat = (typeof IRC_IMPORT_FORMATS)[number];

export interface IrcImportOptions {
  network: string;
  source: IrcSource;
  format?: string;
  /** IANA zone the log times are in; default UTC. */
  timeZone?: string;
  /** Rows per insert statement; default 1000. */
  batchSize?: number;
}

export interface IrcImportCounts {
  files: number;
  /** Non-empty lines read. */
  lines: number;
  /** Rows added now. */
  inserted: number;
  /** Lines not added: already imported (same line hash) or not in a known shape. */
  skipped: number;
  /** Of `skipped`, lines that did not parse. */
  unparsed: number;
  /** Files that were not named like `#chan_YYYYMMDD.log(.txt)` and were passed over. */
  ignoredFiles: string[];
}

const COLUMNS = 9;

/** Imports chat-log files into irc_networks / irc_channels / irc_events, idempotently. */
export class IrcImportService {
  constructor(private readonly orm: Orm) {}

  private knex() {
    return this.orm.em.getConnection().getKnex();
  }

  /** `paths` may be files or folders (walked recursively, in name order). */
  async importPaths(paths: string[], opts: IrcImportOptions): Promise<IrcImportCounts> {
    const format = opts.format ?? 'znc';
    if (!(IRC_IMPORT_FORMATS as readonly string[]).includes(format)) {
      throw new AppError('validation_failed', `unknown log format "${format}"; formats: ${IRC_IMPORT_FORMATS.join(', ')}`);
    }
    if (!(IRC_SOURCES as readonly string[]).includes(opts.source)) {
      throw new AppError('validation_failed', `unknown source "${opts.source}"; sources: ${IRC_SOURCES.join(', ')}`);
    }
    const network = opts.network.trim();
    if (!network) throw new AppError('validation_failed', 'network name is empty');
    const zone = opts.timeZone ?? 'UTC';
    try {
      assertTimeZone(zone);
    } catch (err) {
      throw new AppError('validation_failed', (err as Error).message);
    }
    const files = await collectFiles(paths);
    const counts: IrcImportCounts = { files: 0, lines: 0, inserted: 0, skipped: 0, unparsed: 0, ignoredFiles: [] };
    const networkId = await this.ensureNetwork(opts.source, network);
    const channelIds = new Map<string, number>();
    for (const file of files) {
      const named = parseLogFileName(path.basename(file));
      if (!named) {
        counts.ignoredFiles.push(file);
        continue;
      }
      let channelId = channelIds.get(named.channel);
      if (channelId === undefined) {
        channelId = await this.ensureChannel(networkId, named.channel);
        channelIds.set(named.channel, channelId);
      }
      const parsed = parseZncLog(await readFile(file), named.date);
      const inserted = await this.insertEvents(channelId, named.channel, named.date, parsed.events, zone, opts.batchSize ?? 1000);
      counts.files += 1;
      counts.lines += parsed.lines;
      counts.inserted += inserted;
      counts.unparsed += parsed.unparsed.length;
      counts.skipped += parsed.lines - inserted;
    }
    return counts;
  }

  private async ensureNetwork(source: IrcSource, name: string): Promise<number> {
    const res = await this.knex().raw(
      `insert into irc_networks (source, name) values (?, ?) on conflict (source, name) do update set name = excluded.name returning id`,
      [source, name],
    );
    return Number(res.rows[0].id);
  }

  private async ensureChannel(networkId: number, name: string): Promise<number> {
    const res = await this.knex().raw(
      `insert into irc_channels (network_id, name) values (?, ?) on conflict (network_id, name) do update set name = excluded.name returning id`,
      [networkId, name],
    );
    return Number(res.rows[0].id);
  }

  /** One transaction per file; batches of `batchSize` rows; rows already present are left alone. */
  private async insertEvents(channelId: number, channel: string, date: string, events: ParsedEvent[], zone: string, batchSize: number): Promise<number> {
    if (!events.length) return 0;
    let inserted = 0;
    await this.knex().transaction(async (trx) => {
      for (let i = 0; i < events.length; i += batchSize) {
        const batch = events.slice(i, i + batchSize);
        const values: unknown[] = [];
        for (const e of batch) {
          values.push(
            channelId, e.eventType, formatUtc(localToUtcMs(e.localTime, zone)), e.nick, e.messageText, e.target, e.toNick,
            e.netsplitBurst === null ? null : netsplitGroupId(channel, date, e.netsplitBurst),
            lineHash(channel, date, e.lineNo, e.raw),
          );
        }
        const row = `(${new Array(COLUMNS).fill('?').join(', ')})`;
        const res = await trx.raw(
          `insert into irc_events (channel_id, event_type, occurred_at, nick, message_text, target, to_nick, netsplit_group, line_hash)
           values ${batch.map(() => row).join(', ')}
           on conflict (channel_id, line_hash) do nothing`,
          values,
        );
        inserted += res.rowCount ?? 0;
      }
    });
    return inserted;
  }
}

/** sha256 over channel, date, line number and the line's raw bytes. */
export function lineHash(channel: string, date: string, lineNo: number, raw: Buffer): Buffer {
  return createHash('sha256').update(`${channel}\n${date}\n${lineNo}\n`).update(raw).digest();
}

/** A stable positive 63-bit id for a netsplit burst (same on every re-import), as a decimal string. */
export function netsplitGroupId(channel: string, date: string, firstLineNo: number): string {
  const h = createHash('sha256').update(`netsplit\n${channel}\n${date}\n${firstLineNo}`).digest();
  return (h.readBigUInt64BE(0) & 0x7fffffffffffffffn).toString();
}

async function collectFiles(paths: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of paths) {
    const info = await stat(p).catch(() => null);
    if (!info) throw new AppError('not_found', `no such file or folder: ${p}`);
    if (info.isDirectory()) {
      const entries = (await readdir(p, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
      out.push(...(await collectFiles(entries.filter((e) => e.isDirectory() || e.isFile()).map((e) => path.join(p, e.name)))));
    } else if (info.isFile()) out.push(p);
  }
  return out;
}
