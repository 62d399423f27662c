import { readFileSync, readdirSync } from 'node:fs';

/** Pids of live processes whose command line contains `needle` (Linux /proc; zombies excluded). */
export function processesWithArg(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (!cmdline.split('\0').some((a) => a.includes(needle))) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && state !== 'X') pids.push(Number(entry));
    } catch {
      // gone while we looked
    }
  }
  return pids;
}
