import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import fastifyStatic from '@fastify/static';
import { declarePublicScope } from './public-scope.js';

/** Browser bundles of the web console: `npm run build:web` (scripts/src/web-build.ts) writes them here. */
// coordinator/src/http and coordinator/dist/http are both two levels below coordinator/.
export const PUBLIC_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/public');

/** Entry names a page may ask for (keys of the build's manifest.json). */
export type WebEntry = 'app.css' | 'queue.js' | 'job.js' | 'admin.js' | 'common.js' | 'dns.js' | 'share.js';

let manifest: Record<string, string> | null = null;

function loadManifest(): Record<string, string> {
  if (manifest) return manifest;
  try {
    manifest = JSON.parse(readFileSync(path.join(PUBLIC_DIR, 'manifest.json'), 'utf8')) as Record<string, string>;
  } catch (err) {
    throw new Error(`The web console's browser bundle is missing (${PUBLIC_DIR}/manifest.json): run "npm run build".`, { cause: err });
  }
  return manifest;
}

/** `/assets/job.3FQ2KX7A.js`: the content-hashed URL of a bundle entry. */
export function assetUrl(entry: WebEntry): string {
  const file = loadManifest()[entry];
  if (!file) throw new Error(`web bundle has no entry ${entry}: run "npm run build"`);
  return `/assets/${file}`;
}

/**
 * Serves the bundle under /assets/. Names carry a content hash, so responses are cacheable for a
 * year and `immutable` (a new build has new names); the manifest itself is not served.
 */
export async function assetsPlugin(app: FastifyInstance) {
  loadManifest(); // fail at start, not on the first page view
  // @fastify/static's routes cannot carry config.auth: its own scope is public (like any static file).
  await app.register(async (scope) => {
    declarePublicScope(scope);
    await scope.register(fastifyStatic, {
      root: PUBLIC_DIR,
      prefix: '/assets/',
      immutable: true,
      maxAge: '365d',
      cacheControl: true,
      index: false,
      list: false,
      allowedPath: (pathname) => pathname !== '/manifest.json',
      decorateReply: false,
      schemaHide: true,
    });
    // The icon (pages link /favicon.svg; browsers and tools that ask /favicon.ico by habit get it too, not a 404).
    for (const url of ['/favicon.svg', '/favicon.ico']) {
      scope.get(url, { schema: { hide: true } }, (_request, reply) =>
        reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(FAVICON_SVG),
      );
    }
  });
}

/** A sonar ping: a dot and two arcs, in the console's accent colour. */
const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1f4e79"/><circle cx="10" cy="22" r="3" fill="#fff"/><path d="M10 13a9 9 0 0 1 9 9M10 6a16 16 0 0 1 16 16" fill="none" stroke="#fff" stroke-width="3" stroke-linecap="round"/></svg>\n`;
