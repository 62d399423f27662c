/**
 * Token references: the mapping table stores where a provider API token is, never the token.
 * `env:NAME` reads the coordinator's environment variable NAME; `file:/abs/path` reads the whole
 * file (trimmed); `file:/abs/path#KEY` reads KEY from an env-style file of `KEY=value` lines (the
 * shape of older host-side provider configs).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { validationFailed } from '../../http/errors.js';

const ENV = /^env:([A-Za-z_][A-Za-z0-9_]{0,127})$/;
const FILE = /^file:(\/[^#\0]{1,1000})(?:#([A-Za-z_][A-Za-z0-9_]{0,127}))?$/;

/** 400 unless `ref` is one of the three forms; returns it trimmed. */
export function checkTokenRef(ref: string, field = 'token_ref'): string {
  const r = ref.trim();
  if (ENV.test(r)) return r;
  const f = FILE.exec(r);
  if (f && path.isAbsolute(f[1]!)) return r;
  throw validationFailed({
    [field]: ['must be a reference to the token, not the token: env:VARIABLE, file:/absolute/path or file:/absolute/path#KEY'],
  });
}

/**
 * A reference as API answers name it: `env:NAME` as it is; a file reference without its path
 * (where secrets lie on the server is for administrators, who see it on /admin/dns-providers).
 */
export function publicRef(ref: string): string {
  return ref.startsWith('env:') ? ref : 'a token file (its path: /admin/dns-providers)';
}

/** Parses `KEY=value` lines (comments with #, optional `export `, optional quotes). */
export function parseEnvFile(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!m || line.trimStart().startsWith('#')) continue;
    out.set(m[1]!, m[2]!.replace(/^(['"])(.*)\1$/, '$2'));
  }
  return out;
}

/** The token, or an explanation of why the reference does not give one (never the token, nor a file path, in it). */
export async function resolveTokenRef(ref: string, env: NodeJS.ProcessEnv = process.env): Promise<{ token: string } | { problem: string }> {
  const e = ENV.exec(ref);
  if (e) {
    const v = env[e[1]!]?.trim();
    return v ? { token: v } : { problem: `environment variable ${e[1]} is not set` };
  }
  const f = FILE.exec(ref);
  if (!f) return { problem: `token reference "${ref}" is not env:NAME, file:/path or file:/path#KEY` };
  let text: string;
  try {
    text = await readFile(f[1]!, 'utf8');
  } catch (err) {
    return { problem: `the token file is not readable (${(err as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  const v = f[2] ? parseEnvFile(text).get(f[2])?.trim() : text.trim();
  return v ? { token: v } : { problem: f[2] ? `the token file has no ${f[2]}=` : 'the token file is empty' };
}
