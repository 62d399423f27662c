/**
 * Zone file reads (`method=file`). Zone files allow $ORIGIN, $INCLUDE, relative names, omitted
 * owners/TTLs, parentheses and comments; rather than reimplement BIND's parser we let
 * `named-checkzone -D` canonicalise the file (one absolute record per line, the way named itself
 * would load it) and parse that, rendering rdata exactly as the wire path does.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DnsError } from './errors.js';
import { parsePresentationName, parseRdata, tokenize } from './names.js';
import { MODELLED_TYPES, renderRdata, typeName, typeNumber } from './rdata.js';
import type { DnsRecord } from './tcp-client.js';

export interface ZoneFileOptions {
  /** Path of named-checkzone (default: from PATH). */
  checkzone?: string;
  /** Also apply the zone's journal (`<file>.jnl`, where named keeps dynamic updates not yet written back). */
  journal?: boolean;
  timeoutMs?: number;
}

/** Reads `file` as zone `zone` and returns its records in the same shape and rendering as AXFR. */
export async function readZoneFile(zone: string, file: string, opts: ZoneFileOptions = {}): Promise<DnsRecord[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'sonar-zone-'));
  const out = path.join(dir, 'canonical.zone');
  // -D dump canonical, -o output, -k/-i relaxed: report what is in the file, not whether named would warn about it.
  const args = ['-D', '-o', out, '-k', 'ignore', '-i', 'none', ...(opts.journal ? ['-j'] : []), zone, file];
  try {
    await new Promise<void>((resolve, reject) => {
      execFile(opts.checkzone ?? 'named-checkzone', args, { timeout: opts.timeoutMs ?? 60_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
        if (!err) {
          resolve();
          return;
        }
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') {
          reject(new DnsError('ZONE_FILE', 'named-checkzone is not installed (Debian package bind9-utils)'));
          return;
        }
        reject(new DnsError('ZONE_FILE', `named-checkzone could not load ${file} as ${zone}: ${`${stdout}\n${stderr}`.trim()}`));
      });
    });
    return parsePresentationRecords(await readFile(out, 'utf8'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Parses BIND presentation output (named-checkzone -D, dig): one record per line, `;` comment lines skipped. */
export function parsePresentationRecords(text: string): DnsRecord[] {
  const records: DnsRecord[] = [];
  for (const line of text.split('\n')) {
    const r = parsePresentationLine(line);
    if (r) records.push(r);
  }
  return records;
}

/** One `owner ttl class type rdata` line (absolute owner) → record; null for blank and comment lines. */
export function parsePresentationLine(line: string): DnsRecord | null {
  const trimmed = line.trim();
  if (trimmed === '' || trimmed.startsWith(';')) return null;
  const m = /^(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s*(.*)$/.exec(trimmed);
  if (!m) throw new DnsError('ZONE_FILE', `cannot read record line: ${trimmed}`);
  const [, owner, ttl, klass, type, rest] = m as unknown as [string, string, string, string, string, string];
  const name = parsePresentationName({ text: owner, quoted: false, bytes: Buffer.from(owner) });
  if (!name.ok) throw new DnsError('ZONE_FILE', `bad owner name in: ${trimmed}`);
  const num = typeNumber(type);
  const t = num === undefined ? type.toUpperCase() : typeName(num);
  return { name: name.value, ttl: Number(ttl), class: klass.toUpperCase(), type: t, rdata: canonicalRdata(t, rest, trimmed) };
}

function canonicalRdata(type: string, text: string, line: string): string {
  const generic = /^\\#\s+(\d+)\s*([0-9a-fA-F\s]*)$/.exec(text);
  if (generic) {
    const data = Buffer.from(generic[2]!.replace(/\s+/g, ''), 'hex');
    if (data.length !== Number(generic[1])) throw new DnsError('ZONE_FILE', `generic RDATA length mismatch in: ${line}`);
    return renderRdata({ type: 'GENERIC', typeName: type, data });
  }
  if (!MODELLED_TYPES.has(type)) {
    // Not modelled: keep BIND's text, whitespace normalised outside quoted strings.
    const tk = tokenize(text);
    return tk.ok ? tk.value.map((t) => t.text).join(' ') : text.trim();
  }
  const r = parseRdata(type, text, { lenient: true });
  if (!r.ok) throw new DnsError('ZONE_FILE', `cannot read ${type} data (${r.errors.map((e) => e.message).join('; ')}) in: ${line}`);
  return renderRdata(r.value);
}
