import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

function isExecutableFile(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * Absolute path of an executable: `name` itself when it contains a slash, else the first
 * executable file of that name in a PATH directory, then in `extraDirs`; null when there is none.
 */
export function findExecutable(name: string, extraDirs: readonly string[] = []): string | null {
  if (name.includes('/')) return isExecutableFile(name) ? path.resolve(name) : null;
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), ...extraDirs]) {
    if (!dir) continue;
    const p = path.join(dir, name);
    if (isExecutableFile(p)) return p;
  }
  return null;
}
