/**
 * Wall-clock time in an IANA zone → UTC, with nothing but Intl. Log files carry local times with no
 * offset, so each import names the zone the logger ran in.
 */

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(zone, f);
  }
  return f;
}

/** Throws a RangeError naming the zone when it is not a known IANA zone name. */
export function assertTimeZone(zone: string): void {
  try {
    formatter(zone);
  } catch {
    throw new RangeError(`unknown time zone "${zone}" (use an IANA name such as UTC or Europe/Stockholm)`);
  }
}

/**
 * `Date.UTC` without its two-digit-year rule: `Date.UTC(5, 0, 1)` is 1905-01-01, but a log line of
 * 0005-01-01 means year 5 (months 0-based, as Date.UTC).
 */
export function utcFromParts(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month, day);
  d.setUTCHours(hour, minute, second, 0);
  return d.getTime();
}

/** The zone's offset from UTC at instant `utcMs`, in milliseconds (east positive). */
export function zoneOffsetMs(zone: string, utcMs: number): number {
  const parts: Record<string, number> = {};
  for (const p of formatter(zone).formatToParts(new Date(utcMs))) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  const asUtc = utcFromParts(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
  return asUtc - Math.floor(utcMs / 1000) * 1000;
}

const LOCAL = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})$/;

/**
 * Converts local wall time `YYYY-MM-DD HH:MM:SS` in `zone` to a UTC instant (ms). An ambiguous time
 * (the repeated hour when clocks go back) maps to its first occurrence; a time that does not exist
 * (the skipped hour) is read with the offset in force before the change.
 */
export function localToUtcMs(local: string, zone: string): number {
  const m = LOCAL.exec(local);
  if (!m) throw new RangeError(`not a local date-time: "${local}"`);
  const wall = utcFromParts(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
  if (zone === 'UTC' || zone === 'Etc/UTC') return wall;
  // Imports convert millions of lines, and Intl lookups are slow: remember the offset of each
  // local hour whose first and last second have the same one (every hour without a clock change).
  const hourKey = `${zone}\n${local.slice(0, 13)}`;
  const cached = hourOffsets.get(hourKey);
  if (cached !== undefined) return wall - cached;
  const hourStart = wall - (wall % 3_600_000);
  const first = hourStart - resolveLocal(hourStart, zone);
  const last = hourStart + 3_599_000 - resolveLocal(hourStart + 3_599_000, zone);
  if (first !== last) return resolveLocal(wall, zone);
  if (hourOffsets.size > 200_000) hourOffsets.clear();
  hourOffsets.set(hourKey, first);
  return wall - first;
}

/** `zone\nYYYY-MM-DD HH` → offset (ms) in force through that whole local hour. */
const hourOffsets = new Map<string, number>();

function resolveLocal(wall: number, zone: string): number {
  const before = zoneOffsetMs(zone, wall - 86_400_000);
  const after = zoneOffsetMs(zone, wall + 86_400_000);
  const valid = [before, after].map((o) => wall - o).filter((u) => zoneOffsetMs(zone, u) === wall - u);
  return valid.length ? Math.min(...valid) : wall - before;
}

/** `YYYY-MM-DD HH:MM:SS` in UTC for a UTC instant (the form stored in `timestamp without time zone`). */
export function formatUtc(utcMs: number): string {
  return new Date(utcMs).toISOString().slice(0, 19).replace('T', ' ');
}
