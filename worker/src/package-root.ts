import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The folder of the @sonar/worker package this module runs from: worker/ in a clone (worker/dist/…)
 * and the installed package's folder from the packed tarball, whose dist/ is one bundled file. Found
 * by walking up to the package.json that names the package, so it holds at any depth.
 */
export function workerPackageRoot(from: string = import.meta.dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === '@sonar/worker') return dir;
    if (path.dirname(dir) === dir) throw new Error(`no @sonar/worker package.json above ${from}`);
  }
}

/** The worker package's version (its package.json). */
export function workerVersion(): string {
  return (JSON.parse(readFileSync(path.join(workerPackageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}
