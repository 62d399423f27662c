import type { Knex } from '@mikro-orm/postgresql';
import safeRegex from 'safe-regex2';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import { dbOf } from '../../db/sql.js';
import { SpamProfiles } from './spam-repository.js';
import { AppError, notFound } from '../../http/errors.js';
import { SpamdUnavailable, spamdReport, type SpamdReport } from './spamc.js';

export interface ExtraRule {
  name: string;
  /** A regular expression (case-insensitive) over `field`. */
  pattern: string;
  field: 'subject' | 'from' | 'body' | 'any';
  score: number;
  description: string;
}

export interface SpamProfile {
  id: number;
  name: string;
  threshold: number;
  allow_senders: string[];
  deny_senders: string[];
  extra_rules: ExtraRule[];
  created_at: string;
  updated_at: string;
}

export type ProfileInput = Omit<SpamProfile, 'id' | 'created_at' | 'updated_at'>;

/** What is scored: a raw RFC 822 message, or its parts (assembled into one). */
export type MessageInput = { message: string } | { from?: string | undefined; to?: string | undefined; subject?: string | undefined; body: string };

export interface Analysis {
  status: 'ok' | 'degraded';
  score: number;
  threshold: number;
  verdict: 'spam' | 'ham';
  rules: Array<{ name: string; score: number; description: string; source: 'spamassassin' | 'profile' }>;
  warnings: string[];
  profile: { id: number; name: string } | null;
  spamassassin: { score: number; required_score: number };
}

/** Largest message scored (spamc's own default limit is 500 KB; larger mail is usually not scanned at all). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;

const CRLF = '\r\n';

/** Header-safe: one line, no control characters. */
const headerValue = (v: string) =>
  v
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f]+/g, ' ')
    .trim()
    .slice(0, 998);

/** The message as spamd reads it: the raw message with CRLF line ends, or one assembled from its parts. */
export function rfc822(input: MessageInput): Buffer {
  if ('message' in input) return Buffer.from(input.message.replace(/\r?\n/g, CRLF), 'utf8');
  const headers = [
    `From: ${headerValue(input.from ?? 'unknown@invalid')}`,
    `To: ${headerValue(input.to ?? 'undisclosed-recipients:;')}`,
    `Subject: ${headerValue(input.subject ?? '')}`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: 8bit',
  ];
  return Buffer.from(headers.join(CRLF) + CRLF + CRLF + input.body.replace(/\r?\n/g, CRLF) + CRLF, 'utf8');
}

/** The sender address of a message (From header), lower-cased. */
function senderOf(raw: string): string | null {
  const head = raw.split(/\r?\n\r?\n/)[0] ?? '';
  const from = /^from:\s*(.+(?:\r?\n[ \t].+)*)/im.exec(head)?.[1] ?? '';
  const addr = /<([^>]+)>/.exec(from)?.[1] ?? /[^\s<>"]+@[^\s<>"]+/.exec(from)?.[0] ?? null;
  return addr ? addr.toLowerCase() : null;
}

const matchesSender = (sender: string, entry: string) => {
  const e = entry.trim().toLowerCase();
  if (!e) return false;
  if (e.includes('@')) return sender === e;
  const domain = sender.split('@')[1] ?? '';
  return domain === e.replace(/^@/, '') || domain.endsWith(`.${e.replace(/^@/, '')}`);
};

/** The field an extra rule looks at. */
function fieldText(raw: string, field: ExtraRule['field']): string {
  const [head = '', ...rest] = raw.split(/\r?\n\r?\n/);
  if (field === 'any') return raw;
  if (field === 'body') return rest.join('\n\n');
  const name = field === 'subject' ? 'subject' : 'from';
  return new RegExp(`^${name}:\\s*(.*)$`, 'im').exec(head)?.[1] ?? '';
}

/**
 * Spam scoring (a platform endpoint) on a real SpamAssassin spamd, with per-user profiles: a profile sets
 * the threshold, allow and deny lists of senders, and extra regular-expression rules. The answer
 * says `degraded` whenever scoring was partial (network tests off, rules that timed out) and spamd
 * being unreachable is an error (503) — never a silent zero score.
 */
export class SpamService {
  constructor(
    private readonly orm: Orm,
    private readonly config: Pick<Config, 'SPAMD_HOST' | 'SPAMD_PORT' | 'SPAMD_TIMEOUT_MS' | 'SPAMD_NETWORK_TESTS'>,
  ) {}

  private get knex(): Knex {
    return dbOf(this.orm.em);
  }

  async analyze(ownerId: number, input: MessageInput, profileId?: number): Promise<Analysis> {
    const profile = profileId === undefined ? null : await this.profile(ownerId, profileId);
    const message = rfc822(input);
    if (message.length > MAX_MESSAGE_BYTES) {
      const why = `the message is ${message.length} bytes; at most ${MAX_MESSAGE_BYTES} are scored`;
      throw new AppError('validation_failed', why, { errors: { message: [why] } });
    }
    let report: SpamdReport;
    try {
      report = await spamdReport(
        { host: this.config.SPAMD_HOST, port: this.config.SPAMD_PORT, timeoutMs: this.config.SPAMD_TIMEOUT_MS },
        message,
        `user${ownerId}`,
      );
    } catch (err) {
      // The caller learns what failed, not where spamd runs or how it failed (its address and the
      // socket's error code stay in the server's log, as the error's cause).
      const message =
        err instanceof SpamdUnavailable
          ? 'Spam scoring is unavailable: the scoring service cannot be reached or did not answer in time. Try again later.'
          : 'Spam scoring is unavailable: the scoring service gave an answer that cannot be used. Try again later.';
      throw Object.assign(new AppError('service_unavailable', message), { cause: err });
    }
    const warnings: string[] = [];
    if (!this.config.SPAMD_NETWORK_TESTS) warnings.push('network tests are off (DNS blocklists, URIBL, Razor, Pyzor, DCC): local rules only');
    const timedOut = report.rules.filter((r) => /TIMEOUT|TIMED_OUT/.test(r.name) || /timed? ?out/i.test(r.description));
    if (timedOut.length) warnings.push(`rules that timed out: ${timedOut.map((r) => r.name).join(', ')}`);

    const rules: Analysis['rules'] = report.rules.map((r) => ({ ...r, source: 'spamassassin' as const }));
    let score = report.score;
    if (profile) {
      const raw = message.toString('utf8');
      const sender = senderOf(raw);
      const allowed = sender ? profile.allow_senders.find((e) => matchesSender(sender, e)) : undefined;
      const denied = sender ? profile.deny_senders.find((e) => matchesSender(sender, e)) : undefined;
      const add = (name: string, points: number, description: string) => {
        rules.push({ name, score: points, description, source: 'profile' });
        score += points;
      };
      if (denied) add('PROFILE_DENY_SENDER', 100, `Sender ${sender} is on the profile's deny list (${denied})`);
      else if (allowed) add('PROFILE_ALLOW_SENDER', -100, `Sender ${sender} is on the profile's allow list (${allowed})`);
      for (const rule of profile.extra_rules) {
        if (new RegExp(rule.pattern, 'iu').test(fieldText(raw, rule.field)))
          add(rule.name, rule.score, rule.description || `Profile rule /${rule.pattern}/ on ${rule.field}`);
      }
    }
    score = Math.round(score * 10) / 10;
    const threshold = profile?.threshold ?? report.required;
    return {
      status: warnings.length ? 'degraded' : 'ok',
      score,
      threshold,
      verdict: score >= threshold ? 'spam' : 'ham',
      rules,
      warnings,
      profile: profile ? { id: profile.id, name: profile.name } : null,
      spamassassin: { score: report.score, required_score: report.required },
    };
  }

  // ---- profiles (the owner's only; another user's profile is 404) ----------------------------------

  async profiles(ownerId: number): Promise<SpamProfile[]> {
    return (await SpamProfiles.list.rows(this.knex, { ownerId })).map(present);
  }

  async profile(ownerId: number, id: number): Promise<SpamProfile> {
    const row = await SpamProfiles.get.first(this.knex, { ownerId, id });
    if (!row) throw notFound('Spam profile not found.');
    return present(row);
  }

  async createProfile(ownerId: number, input: ProfileInput): Promise<SpamProfile> {
    checkRules(input.extra_rules);
    try {
      const row = await SpamProfiles.create.first(this.knex, { ownerId, ...fieldsOf(input) });
      return present(row!);
    } catch (err) {
      throw duplicateName(err, input.name);
    }
  }

  async updateProfile(ownerId: number, id: number, input: ProfileInput): Promise<SpamProfile> {
    checkRules(input.extra_rules);
    try {
      const row = await SpamProfiles.update.first(this.knex, { ownerId, id, ...fieldsOf(input) });
      if (!row) throw notFound('Spam profile not found.');
      return present(row);
    } catch (err) {
      throw duplicateName(err, input.name);
    }
  }

  async deleteProfile(ownerId: number, id: number): Promise<void> {
    if ((await SpamProfiles.remove.run(this.knex, { ownerId, id })) === 0) throw notFound('Spam profile not found.');
  }
}

/** A profile's stored fields as the repository takes them (the rules as JSON text). */
const fieldsOf = (input: ProfileInput) => ({
  name: input.name,
  threshold: input.threshold,
  allowSenders: input.allow_senders,
  denySenders: input.deny_senders,
  extraRules: JSON.stringify(input.extra_rules),
});

export interface ProfileRow {
  id: number;
  name: string;
  threshold: number;
  allow_senders: string[];
  deny_senders: string[];
  extra_rules: ExtraRule[] | string;
  created_at: Date;
  updated_at: Date;
}

const present = (r: ProfileRow): SpamProfile => ({
  id: Number(r.id),
  name: r.name,
  threshold: Number(r.threshold),
  allow_senders: r.allow_senders,
  deny_senders: r.deny_senders,
  extra_rules: typeof r.extra_rules === 'string' ? (JSON.parse(r.extra_rules) as ExtraRule[]) : r.extra_rules,
  created_at: new Date(r.created_at).toISOString(),
  updated_at: new Date(r.updated_at).toISOString(),
});

/**
 * Each extra rule's pattern must compile and must not backtrack catastrophically (safe-regex2's
 * star-height check): patterns run on message bodies up to 1 MB in this process. 422 under
 * extra_rules.N.pattern otherwise.
 */
function checkRules(rules: ExtraRule[]) {
  const errors: Record<string, string[]> = {};
  rules.forEach((r, i) => {
    try {
      new RegExp(r.pattern, 'iu');
      if (!safeRegex(r.pattern)) errors[`extra_rules.${i}.pattern`] = ['nested repetition such as (a+)+ can take exponential time; simplify the pattern'];
    } catch (err) {
      errors[`extra_rules.${i}.pattern`] = [`not a valid regular expression: ${(err as Error).message}`];
    }
  });
  if (Object.keys(errors).length) throw new AppError('validation_failed', Object.values(errors)[0]![0]!, { errors });
}

function duplicateName(err: unknown, name: string): unknown {
  if ((err as { code?: string }).code === '23505') {
    const message = `you already have a profile named "${name}"`;
    return new AppError('validation_failed', message, { errors: { name: [message] } });
  }
  return err;
}
