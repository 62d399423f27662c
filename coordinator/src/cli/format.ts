import { InvalidArgumentError } from 'commander';

export function positiveInt(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError('must be a positive whole number');
  return Number(value);
}

/** Pads columns so lists read as a table; `empty` is printed when there are no rows. */
export function table(header: string[], rows: string[][], empty: string): string[] {
  if (!rows.length) return [empty];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  return [header, ...rows].map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd(),
  );
}

export const iso = (d: Date | null) => (d ? d.toISOString() : null);
export const day = (iso: string | null) => iso?.slice(0, 10) ?? '-';
/** Secrets are stored hashed, so this is the only time the operator can see them. */
export const shownOnce = (what: string, secret: string) => [`${what}: ${secret}`, `note: the ${what} is not shown again; store it now`];

export function nonNegativeInt(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
  return Number(value);
}
