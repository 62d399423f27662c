/**
 * The one rule for which days the chat-log archive holds, shared by the importer, the live logger,
 * the API's date filters and the reader's pages: UTC days from ARCHIVE_FIRST_DAY to ARCHIVE_LAST_DAY.
 * PostgreSQL's timestamps have no year 0 (`0000-01-01` is "out of range"), and a whole day's range
 * ends at the next midnight, which must be a four-digit day too (so 9999-12-31 is past the end).
 */
import { isValidDate } from './parsers/common.js';
import { utcFromParts } from './time-zone.js';

export const ARCHIVE_FIRST_DAY = '0001-01-01';
export const ARCHIVE_LAST_DAY = '9999-12-30';
export const ARCHIVE_RANGE_TEXT = `${ARCHIVE_FIRST_DAY} to ${ARCHIVE_LAST_DAY} (UTC)`;

const FIRST_MS = utcFromParts(1, 0, 1, 0, 0, 0);
/** Exclusive: the first instant after ARCHIVE_LAST_DAY. */
const END_MS = utcFromParts(9999, 11, 31, 0, 0, 0);

/** A real calendar day `YYYY-MM-DD` inside the archive's range. */
export function isArchiveDay(day: string): boolean {
  return isValidDate(day) && day >= ARCHIVE_FIRST_DAY && day <= ARCHIVE_LAST_DAY;
}

/** A year (`YYYY` or a number) the archive's range touches. */
export function isArchiveYear(year: number): boolean {
  return Number.isInteger(year) && year >= 1 && year <= 9999;
}

/** A UTC instant (ms) inside the archive's range. */
export function isArchiveInstant(utcMs: number): boolean {
  return Number.isFinite(utcMs) && utcMs >= FIRST_MS && utcMs < END_MS;
}
