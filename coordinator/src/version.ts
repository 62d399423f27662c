import { readFileSync } from 'node:fs';

/** The public platform version: the semantic version of the root package.json. */
export function readPlatformVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };
  if (!pkg.version || !/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(pkg.version)) {
    throw new Error('package.json has no semantic version');
  }
  return pkg.version;
}
