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

/** Where Debian's pocketsphinx-en-us (and a source build of PocketSphinx 5) put the US English model. */
export const POCKETSPHINX_MODEL_DIRS = ['/usr/share/pocketsphinx/model/en-us', '/usr/local/share/pocketsphinx/model/en-us'] as const;

/** Whether a folder holds the en-us model as pocketsphinx reads it: en-us/mdef, en-us.lm.bin, cmudict-en-us.dict. */
export function pocketsphinxModelIn(dir: string): boolean {
  return ['en-us/mdef', 'en-us.lm.bin', 'cmudict-en-us.dict'].every((f) => {
    try {
      return statSync(path.join(dir, f)).isFile();
    } catch {
      return false;
    }
  });
}

/**
 * What the local worker agent of the quick start lacks to transcribe, in one sentence with the
 * exact install command (Debian/Ubuntu), or null when nothing is missing: ffmpeg always (it
 * decodes every source), pocketsphinx and its en-us model when that is the model it runs.
 */
export function localWorkerMissing(opts: { pocketsphinx: boolean; modelDir?: string | undefined }): string | null {
  const missing: Array<{ what: string; pkg: string }> = [];
  if (!findExecutable('ffmpeg')) missing.push({ what: 'ffmpeg', pkg: 'ffmpeg' });
  if (opts.pocketsphinx) {
    if (!findExecutable('pocketsphinx') && !findExecutable('pocketsphinx_continuous')) missing.push({ what: 'pocketsphinx', pkg: 'pocketsphinx' });
    const dirs = [opts.modelDir, ...POCKETSPHINX_MODEL_DIRS].filter((d): d is string => !!d);
    if (!dirs.some(pocketsphinxModelIn)) missing.push({ what: 'the pocketsphinx en-us model', pkg: 'pocketsphinx-en-us' });
  }
  if (!missing.length) return null;
  const names = missing.map((m) => m.what);
  const list = names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} and ${names.at(-1)!}`;
  return `The local worker cannot transcribe: ${list} ${missing.length === 1 ? 'is' : 'are'} missing. Install with: sudo apt-get install ${missing.map((m) => m.pkg).join(' ')}`;
}
