/**
 * What every chat-log format parser produces. Parsers are pure: bytes in, events out. Times stay
 * in the log's own wall clock (`YYYY-MM-DD HH:MM:SS`) unless the line carries an explicit UTC
 * offset; the importer converts to UTC with the import's time zone.
 */

export const IRC_EVENT_TYPES = ['PRIVMSG', 'ACTION', 'NOTICE', 'JOIN', 'PART', 'QUIT', 'NICK', 'KICK', 'MODE', 'TOPIC', 'NETSPLIT', 'NETMERGE'] as const;
export type IrcEventType = (typeof IRC_EVENT_TYPES)[number];

/** One line's meaning, without its position in the file. */
export interface ParsedLine {
  eventType: IrcEventType;
  /** Who acted (speaker, joiner, quitter, the op who kicked or set a mode, the old nick of a NICK). */
  nick: string | null;
  /** Message, action text, notice, part/quit/kick reason, topic, or mode string. */
  messageText: string | null;
  /** Mode arguments, or the other party of a private-message log. */
  target: string | null;
  /** New nick of a NICK, the kicked nick of a KICK, or the nick a message is addressed to. */
  toNick: string | null;
}

export interface ParsedEvent extends ParsedLine {
  /** 1-based line number in the file. */
  lineNo: number;
  /** The line's raw bytes (without the line ending), for idempotency hashing. */
  raw: Buffer;
  /** `YYYY-MM-DD HH:MM:SS` in the log's wall clock. */
  localTime: string;
  /** Minutes east of UTC when the line itself says (WeeChat `%z`, ISO 8601 offsets); null: use the import's zone. */
  utcOffsetMinutes: number | null;
  /** For NETSPLIT/NETMERGE rows: line number of the first row of the burst this one belongs to. */
  netsplitBurst: number | null;
}

export interface ParsedFile {
  events: ParsedEvent[];
  /** Non-empty lines that are neither events nor known bookkeeping lines (log opened/closed, day changed). */
  unparsed: Array<{ lineNo: number; text: string }>;
  /** Non-empty lines in the file. */
  lines: number;
  /** Channel (or query partner) named inside the file, where the format writes one; null otherwise. */
  channel: string | null;
}

/** What a log file's name tells: the channel (or query partner) and the day, where the name carries them. */
export interface FileNameInfo {
  channel: string | null;
  /** `YYYY-MM-DD` */
  date: string | null;
}

export interface ParseContext {
  /** From the file name or the import options; formats whose lines carry only a time need it. */
  date: string | null;
  /**
   * When this is a later piece of a file: the time of day (`HH:MM:SS`) the previous piece ended
   * at, so a clock that goes back across the cut still rolls the day over.
   */
  time?: string | null;
}

export interface LogFormat {
  readonly name: string;
  /** Human description for `--help` and error messages. */
  readonly description: string;
  /**
   * Channel/date from a file's path in this format's usual naming (the base name, and the parent
   * folder where the format names files by day only); null when the path is not one of them.
   */
  parseFileName(filePath: string): FileNameInfo | null;
  /**
   * How many of these decoded lines (the first non-empty lines of a file) this format recognises,
   * as a share 0..1. Auto-detection takes the best score above 0.5.
   */
  detect(lines: string[]): number;
  /** Parses a whole file. Throws ParseError when the file cannot be read at all (no date for time-only lines). */
  parse(content: Buffer, ctx: ParseContext): ParsedFile;
}

export class ParseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ParseError';
  }
}
