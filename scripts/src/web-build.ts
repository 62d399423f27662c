import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';

/** Browser entry points of the web console (coordinator/web), by the name pages ask for. */
export const WEB_ENTRIES = ['app.css', 'queue.js', 'job.js', 'admin.js', 'common.js', 'dns.js', 'share.js'] as const;

/** Where the bundle lands (coordinator/dist/public) and the manifest the server reads there. */
export const publicDir = (root: string) => path.join(root, 'coordinator', 'dist', 'public');

/**
 * Bundles coordinator/web with esbuild into coordinator/dist/public: content-hashed file names
 * (`job.3FQ2KX7A.js`) so the server can send them with an immutable cache, ES modules with shared
 * chunks, and `manifest.json` mapping each entry name to its hashed file. The folder is emptied
 * first so no stale bundle survives a build. Type checking is tsc's (coordinator/web/tsconfig.json).
 */
export async function buildWeb(root: string, opts: { minify?: boolean } = {}): Promise<Record<string, string>> {
  const out = publicDir(root);
  await rm(out, { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  const web = path.join(root, 'coordinator', 'web');
  const entryPoints = WEB_ENTRIES.map((name) => ({
    in: path.join(web, name.endsWith('.css') ? `styles/${name}` : `pages/${name.replace(/\.js$/, '.ts')}`),
    out: name.replace(/\.(css|js)$/, ''),
  }));
  const result = await build({
    absWorkingDir: root,
    entryPoints,
    outdir: out,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    entryNames: '[name].[hash]',
    chunkNames: 'chunk.[hash]',
    assetNames: '[name].[hash]',
    minify: opts.minify ?? true,
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'warning',
    legalComments: 'linked',
  });
  const manifest: Record<string, string> = {};
  for (const [file, meta] of Object.entries(result.metafile.outputs)) {
    if (!meta.entryPoint) continue;
    const ext = path.extname(file);
    const entry = WEB_ENTRIES.find((name) => path.extname(name) === ext && path.basename(file).startsWith(`${name.slice(0, -ext.length)}.`));
    if (entry) manifest[entry] = path.basename(file);
  }
  for (const name of WEB_ENTRIES) if (!manifest[name]) throw new Error(`web build: no output for ${name}`);
  await writeFile(path.join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}
