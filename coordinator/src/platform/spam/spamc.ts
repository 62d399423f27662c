import { connect } from 'node:net';

/**
 * A SPAMC/1.5 client for SpamAssassin's spamd (the protocol its `spamc` speaks: one request per
 * TCP connection, `REPORT` answers the score, the required score and the report table with every
 * matched rule and its description). Hand-written: the npm spamc clients are unmaintained for a
 * decade, and the protocol is a request line, two headers and a body.
 */
export interface SpamdReport {
  score: number;
  /** spamd's own required score (`required_score`). */
  required: number;
  isSpam: boolean;
  rules: Array<{ name: string; score: number; description: string }>;
}

/** spamd could not be asked (refused, reset, timed out) or answered something that is not SPAMC. */
export class SpamdUnavailable extends Error {}

export interface SpamdAddress {
  host: string;
  port: number;
  timeoutMs: number;
}

export function spamdReport(address: SpamdAddress, message: Buffer, user = 'sonar'): Promise<SpamdReport> {
  return new Promise<SpamdReport>((resolve, reject) => {
    const socket = connect({ host: address.host, port: address.port });
    const chunks: Buffer[] = [];
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      reject(new SpamdUnavailable(why));
    };
    socket.setTimeout(address.timeoutMs, () => fail(`spamd at ${address.host}:${address.port} did not answer within ${address.timeoutMs} ms`));
    socket.on('error', (err: NodeJS.ErrnoException) => fail(`spamd at ${address.host}:${address.port}: ${err.code ?? err.message}`));
    socket.on('connect', () => {
      socket.write(`REPORT SPAMC/1.5\r\nContent-length: ${message.length}\r\nUser: ${user}\r\n\r\n`);
      socket.end(message);
    });
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('end', () => {
      if (settled) return;
      try {
        const report = parseReport(Buffer.concat(chunks).toString('utf8'));
        settled = true;
        resolve(report);
      } catch (err) {
        fail((err as Error).message);
      }
    });
  });
}

/** Parses spamd's answer to REPORT: status line, headers (`Spam: True ; 1003.3 / 5.0`), then the report text. */
export function parseReport(raw: string): SpamdReport {
  const split = raw.indexOf('\r\n\r\n');
  const head = (split >= 0 ? raw.slice(0, split) : raw).split('\r\n');
  const body = split >= 0 ? raw.slice(split + 4) : '';
  const status = /^SPAMD\/\d+\.\d+ (\d+) (\S+)/.exec(head[0] ?? '');
  if (!status) throw new Error(`spamd answered something that is not SPAMC: ${JSON.stringify((head[0] ?? '').slice(0, 80))}`);
  if (status[1] !== '0') throw new Error(`spamd refused the request: ${status[1]} ${status[2]}`);
  const spam = head.map((h) => /^Spam:\s*(True|False|Yes|No)\s*;\s*(-?[\d.]+)\s*\/\s*(-?[\d.]+)/i.exec(h)).find(Boolean);
  if (!spam) throw new Error('spamd answered without a Spam header');
  return {
    isSpam: /^(true|yes)$/i.test(spam[1]!),
    score: Number(spam[2]),
    required: Number(spam[3]),
    rules: parseRuleTable(body),
  };
}

/**
 * The rule table of a SpamAssassin report:
 *   ` pts rule name              description`
 *   `---- ---------------------- ---------------------`
 *   `1000 GTUBE                  BODY: Generic Test for …`
 * Descriptions that wrap continue on indented lines.
 */
export function parseRuleTable(report: string): SpamdReport['rules'] {
  const lines = report.split(/\r?\n/);
  const start = lines.findIndex((l) => /^-{3,}\s+-{3,}\s+-{3,}/.test(l));
  if (start < 0) return [];
  const rules: SpamdReport['rules'] = [];
  for (const line of lines.slice(start + 1)) {
    const m = /^\s*(-?\d+(?:\.\d+)?)\s+([A-Z0-9_]+)\s+(.*)$/.exec(line);
    if (m) rules.push({ score: Number(m[1]), name: m[2]!, description: m[3]!.trim() });
    else if (/^\s{20,}\S/.test(line) && rules.length) rules.at(-1)!.description += ` ${line.trim()}`;
    else if (!line.trim()) break;
  }
  return rules;
}
