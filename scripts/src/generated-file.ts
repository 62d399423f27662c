// Writes a generated file, or with `--check` only compares it (exit code 1 when stale).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Runs from scripts/dist/: the repository root is two levels up.
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export function readRepoFile(relative: string): string | null {
  try {
    return readFileSync(path.join(repoRoot, relative), 'utf8');
  } catch {
    return null;
  }
}

/** Parses `[--check]`; exits 2 on anything else. */
export function checkOnly(command: string): boolean {
  const args = process.argv.slice(2);
  if (args.some((a) => a !== '--check')) {
    process.stderr.write(`usage: npm run ${command} [-- --check]\n`);
    process.exit(2);
  }
  return args.includes('--check');
}

/** Writes `text` to `relative` unless it is already that; with `check`, only reports. Returns whether it was current. */
export function writeOrCheck(relative: string, text: string, command: string, check: boolean): boolean {
  const current = readRepoFile(relative);
  if (current === text) {
    process.stderr.write(`${relative} is ${check ? '' : 'already '}current\n`);
    return true;
  }
  if (check) {
    process.stderr.write(`${relative} is stale: run \`npm run ${command}\` and commit the result\n`);
    process.exitCode = 1;
  } else {
    writeFileSync(path.join(repoRoot, relative), text);
    process.stderr.write(`wrote ${relative} (${text.split('\n').length} lines)\n`);
  }
  return false;
}
