/**
 * Issue 41, chat-log archive: the rules that need no database. Leap seconds stay on their day,
 * years 0001–0099 are not read as 1900–1999 (Date.UTC's two-digit-year rule), one range of days
 * for the whole archive, control characters removed (and reported) before rows are stored, and
 * tokens with punctuation searched by their parts. The importer and API checks are in
 * irc-archive-defects.test.ts (this folder) and test/e2e/irc-archive-defects.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { isArchiveDay, isArchiveInstant, isArchiveYear } from '../src/irc/archive-dates.js';
import { toRows, type RowNotes } from '../src/irc/import-service.js';
import { stripControls } from '../src/irc/parsers/common.js';
import { limnoriaFormat } from '../src/irc/parsers/limnoria.js';
import { parseZncLine, parseZncLog } from '../src/irc/parsers/znc.js';
import { classifyTerm, isPartsToken, parseQuery, tokenParts } from '../src/irc/search-terms.js';
import { localToUtcMs } from '../src/irc/time-zone.js';

const notes = (): RowNotes => ({ outOfRange: [], controls: [] });

describe('leap second', () => {
  it('keeps 23:59:60 on its day as 23:59:59', () => {
    expect(parseZncLine('[23:59:60] <alice> leap')?.time).toBe('23:59:59');
    const parsed = parseZncLog('[23:59:59] <alice> before\n[23:59:60] <alice> leap\n', '2016-12-31');
    const rows = toRows('#c', parsed.events, 'UTC');
    expect(rows.map((r) => r.occurredAt)).toEqual(['2016-12-31 23:59:59', '2016-12-31 23:59:59']);
    // Two lines, two keys (the raw bytes differ).
    expect(new Set(rows.map((r) => r.lineHash.toString('hex'))).size).toBe(2);
  });
});

describe('years 0000–0099 and 9999-12-31', () => {
  it('reads years below 100 as written, in every zone', () => {
    expect(localToUtcMs('0005-01-01 00:00:00', 'UTC')).toBe(Date.parse('0005-01-01T00:00:00Z'));
    expect(localToUtcMs('0099-12-31 23:00:00', 'UTC')).toBe(Date.parse('0099-12-31T23:00:00Z'));
    expect(new Date(localToUtcMs('0050-06-01 12:00:00', 'Europe/Stockholm')).toISOString().slice(0, 4)).toBe('0050');
  });

  it('has one range of days: 0001-01-01 to 9999-12-30', () => {
    expect(isArchiveDay('0000-01-01')).toBe(false);
    expect(isArchiveDay('0001-01-01')).toBe(true);
    expect(isArchiveDay('9999-12-30')).toBe(true);
    expect(isArchiveDay('9999-12-31')).toBe(false);
    expect(isArchiveYear(0)).toBe(false);
    expect(isArchiveYear(9999)).toBe(true);
    expect(isArchiveInstant(Date.parse('9999-12-30T23:59:59Z'))).toBe(true);
    expect(isArchiveInstant(Date.parse('9999-12-31T00:00:00Z'))).toBe(false);
  });

  it('stores 0050 as 0050, and leaves 0000-01-01 and 9999-12-31 out as out of range', () => {
    const log = ['0000-01-01T00:00:00  <alice> x', '0050-06-01T12:00:00  <alice> y', '9999-12-31T12:00:00  <alice> z'].join('\n');
    const parsed = limnoriaFormat.parse(Buffer.from(`${log}\n`), { date: null, time: null });
    const n = notes();
    const rows = toRows('#c', parsed.events, 'UTC', new Map(), n);
    expect(rows.map((r) => [r.occurredAt, r.messageText])).toEqual([['0050-06-01 12:00:00', 'y']]);
    expect(n.outOfRange.map((e) => e.lineNo)).toEqual([1, 3]);
  });
});

describe('control characters', () => {
  it('removes NUL, BEL, ESC (with its ANSI sequence) and DEL, keeps tab', () => {
    expect(stripControls('a\x00b')).toEqual({ text: 'ab', removed: 1 });
    expect(stripControls('ring\x07 \x1b[31mred\x1b[0m\tdone\x7f')).toEqual({ text: 'ring red\tdone', removed: 11 });
    expect(stripControls('plain')).toEqual({ text: 'plain', removed: 0 });
  });

  it('stores rows without them and says which lines held them', () => {
    const parsed = parseZncLog('[10:00:00] <alice> nul\x00here\n[10:00:01] <bob> ok\n[10:00:02] <carl> bell\x07 and \x1b[1mesc\n', '2020-01-01');
    const n = notes();
    const rows = toRows('#c', parsed.events, 'UTC', new Map(), n);
    expect(rows.map((r) => r.messageText)).toEqual(['nulhere', 'ok', 'bell and esc']);
    expect(n.controls.map((e) => e.lineNo)).toEqual([1, 3]);
  });
});

describe('tokens with punctuation', () => {
  it('are searched by their letter and digit parts', () => {
    expect(classifyTerm("don't")).toMatchObject({ kind: 'token', text: "don't" });
    expect(tokenParts("don't")).toEqual(['don', 't']);
    expect(tokenParts('gpii-3544')).toEqual(['gpii', '3544']);
    expect(tokenParts('pull-request')).toEqual(['pull', 'request']);
    expect(tokenParts('node.js')).toEqual(['node', 'js']);
    expect(parseQuery('node.js').include.every(isPartsToken)).toBe(true);
    // No letters or digits: the whole lexeme only.
    expect(isPartsToken(classifyTerm('😀😀😀')!)).toBe(false);
  });
});
