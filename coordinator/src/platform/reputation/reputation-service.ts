import { createHash } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import type { Knex } from '@mikro-orm/postgresql';
import type { AuthUser } from '../../accounts/types.js';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import { dbOf } from '../../db/sql.js';
import { Reputation } from './reputation-repository.js';
import { AppError, notFound, validationFailed } from '../../http/errors.js';
import type { BlocklistResult, DnsblClient } from './dnsbl.js';

/** What may be rated: public things, never the people behind them. */
export const TARGET_TYPES = ['url', 'post', 'domain', 'ip', 'content'] as const;
export type TargetType = (typeof TARGET_TYPES)[number];

/** Types that name people or profiles: refused with 422 and the reason. */
export const PERSON_TYPES = ['person', 'user', 'profile', 'account', 'username', 'handle', 'email', 'phone', 'member'] as const;

export const CATEGORIES = ['spam', 'phishing', 'malware', 'scam', 'abuse', 'misinformation', 'other'] as const;
export type Category = (typeof CATEGORIES)[number];

/** Community score at or above which the verdict is `bad` (suspicious from 1). */
export const BAD_SCORE = 3;

export interface Target {
  type: TargetType;
  /** The normalised value the reputation is kept under. */
  value: string;
  /** For blocklists: the host name and/or address the target stands on. */
  domain?: string | undefined;
  ip?: string | undefined;
}

/** Profile pages are people: `/@alice`, `/users/alice`, `/profile/alice`, `/u/alice`, `/people/…`, `/members/…`. */
const PROFILE_PATH = /^\/(?:@[^/]+|~[^/]+|(?:users?|profiles?|u|people|persons?|members?|accounts?|author)\/[^/]+)\/?$/i;

const personRefusal = (field: string, why: string) =>
  validationFailed({ [field]: [`${why}: reputation is kept for public content, posts, URLs and domains, never for people or profiles`] });

function canonicalIp(ip: string): string {
  return isIPv6(ip) ? new URL(`http://[${ip}]/`).hostname.slice(1, -1) : ip;
}

function domainOf(raw: string, field: string): string {
  const d = raw.trim().toLowerCase().replace(/\.$/, '');
  const labels = d.split('.');
  if (
    d.length > 253 ||
    labels.length < 2 ||
    !labels.every((l) => /^(?:xn--)?[a-z0-9_](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(l)) ||
    /^\d+$/.test(labels[labels.length - 1]!)
  )
    throw validationFailed({ [field]: [`"${raw}" is not a domain name`] });
  return d;
}

/**
 * Parses and normalises a target; `type` omitted: a URL when it has a scheme, an IP address, a
 * domain. People and profiles (their types, `mailto:`, e-mail addresses, profile URLs) are 422.
 */
export function parseTarget(type: string | undefined, raw: string): Target {
  const value = raw.trim();
  if ((PERSON_TYPES as readonly string[]).includes((type ?? '').toLowerCase())) throw personRefusal('type', `"${type}" names a person or profile`);
  if (/^mailto:/i.test(value) || /^[^\s@/:]+@[^\s@/]+\.[^\s@/]+$/.test(value)) throw personRefusal('target', 'an e-mail address identifies a person');
  const t = (type ?? (/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? 'url' : isIPv4(value) || isIPv6(value) ? 'ip' : 'domain')) as TargetType;
  if (!(TARGET_TYPES as readonly string[]).includes(t)) throw validationFailed({ type: [`must be one of ${TARGET_TYPES.join(', ')}`] });
  if (!value) throw validationFailed({ target: ['is required'] });
  switch (t) {
    case 'url':
    case 'post': {
      let u: URL;
      try {
        u = new URL(value);
      } catch {
        throw validationFailed({ target: [`"${value}" is not an absolute URL`] });
      }
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw validationFailed({ target: ['only http and https URLs are rated'] });
      if (u.username || u.password) throw validationFailed({ target: ['a URL with credentials is not rated'] });
      if (PROFILE_PATH.test(u.pathname)) throw personRefusal('target', `${u.pathname} is a profile page`);
      u.hash = '';
      const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
      const isIp = isIPv4(host) || isIPv6(host);
      return { type: t, value: u.toString(), ...(isIp ? { ip: canonicalIp(host) } : { domain: domainOf(host, 'target') }) };
    }
    case 'domain': {
      const d = domainOf(value, 'target');
      return { type: t, value: d, domain: d };
    }
    case 'ip': {
      if (!isIPv4(value) && !isIPv6(value)) throw validationFailed({ target: [`"${value}" is not an IPv4 or IPv6 address`] });
      const ip = canonicalIp(value);
      return { type: t, value: ip, ip };
    }
    case 'content': {
      // Public content is kept by its SHA-256: the text itself is never stored.
      const digest = /^sha256:[0-9a-f]{64}$/i.test(value) ? value.toLowerCase() : `sha256:${createHash('sha256').update(value, 'utf8').digest('hex')}`;
      return { type: t, value: digest };
    }
  }
}

export interface Lookup {
  target: { type: TargetType; value: string };
  verdict: 'bad' | 'suspicious' | 'clean' | 'unknown';
  community: { score: number; reporters: number; categories: Partial<Record<Category, number>>; last_report_at: string | null };
  blocklists: BlocklistResult[];
  complete: boolean;
}

export interface ReportRow {
  id: number;
  reporter_id: number;
  category: Category;
  weight: number;
  created_at: Date;
}

type RepConfig = Pick<Config, 'REPUTATION_REPORT_HALF_LIFE_DAYS' | 'REPUTATION_REPORTS_PER_HOUR'>;

/**
 * Reputation of public things (never people): community reports (one per reporter and target, a
 * newer report replaces the older; weighted 1, administrators 2; each decays by half every
 * REPUTATION_REPORT_HALF_LIFE_DAYS) combined with DNS blocklists (RFC 5782). Every report action is
 * written to the audit table.
 */
export class ReputationService {
  constructor(
    private readonly orm: Orm,
    private readonly dnsbl: DnsblClient,
    private readonly config: RepConfig,
    private readonly now: () => Date = () => new Date(),
  ) {}

  private get knex(): Knex {
    return dbOf(this.orm.em);
  }

  async lookup(target: Target): Promise<Lookup> {
    const [rows, blocklists] = await Promise.all([
      Reputation.reportsOf.rows(this.knex, { targetType: target.type, target: target.value }),
      this.dnsbl.check(target),
    ]);
    const now = this.now().getTime();
    const halfLifeMs = this.config.REPUTATION_REPORT_HALF_LIFE_DAYS * 86_400_000;
    const categories: Partial<Record<Category, number>> = {};
    let score = 0;
    let last: Date | null = null;
    for (const r of rows) {
      const at = new Date(r.created_at);
      const decayed = Number(r.weight) * Math.pow(0.5, Math.max(0, now - at.getTime()) / halfLifeMs);
      score += decayed;
      categories[r.category] = round((categories[r.category] ?? 0) + decayed);
      if (!last || at > last) last = at;
    }
    score = round(score);
    const listed = blocklists.some((b) => b.status === 'listed');
    const unavailable = blocklists.some((b) => b.status === 'unavailable');
    const verdict = listed || score >= BAD_SCORE ? 'bad' : score >= 1 ? 'suspicious' : unavailable ? 'unknown' : 'clean';
    return {
      target: { type: target.type, value: target.value },
      verdict,
      community: { score, reporters: rows.length, categories, last_report_at: last ? last.toISOString() : null },
      blocklists,
      complete: !unavailable,
    };
  }

  /** A report by a signed-in user: replaces that user's earlier report of the same target. 429 past the hourly budget. */
  async report(user: AuthUser, target: Target, category: Category, comment: string, clientIp: string) {
    const now = this.now();
    return this.knex.transaction(async (trx) => {
      // One budget per user, counted in the audit trail (serialised per user by the advisory lock).
      await Reputation.lockReporter.rows(trx, { userId: user.id });
      const recent = await Reputation.reportsSince.first(trx, { userId: user.id, since: new Date(now.getTime() - 3_600_000) });
      if (Number(recent?.n ?? 0) >= this.config.REPUTATION_REPORTS_PER_HOUR) {
        throw new AppError('rate_limited', `At most ${this.config.REPUTATION_REPORTS_PER_HOUR} reports an hour per user; try again later.`, {
          headers: { 'retry-after': '3600' },
        });
      }
      const weight = user.isAdmin ? 2 : 1;
      const row = (await Reputation.saveReport.first(trx, {
        userId: user.id,
        targetType: target.type,
        target: target.value,
        category,
        comment,
        weight,
        at: now,
      }))!;
      await Reputation.audit.run(trx, {
        at: now,
        actorId: user.id,
        action: row.replaced ? 'replace' : 'report',
        targetType: target.type,
        target: target.value,
        detail: JSON.stringify({ report_id: Number(row.id), category, weight, comment }),
        clientIp,
      });
      return {
        id: Number(row.id),
        target: { type: target.type, value: target.value },
        category,
        comment,
        weight,
        created_at: now.toISOString(),
        replaced: row.replaced,
      };
    });
  }

  /** Withdraws the user's own report (404 for anyone else's). */
  async withdraw(user: AuthUser, id: number, clientIp: string) {
    await this.knex.transaction(async (trx) => {
      const r = await Reputation.withdraw.first(trx, { id, userId: user.id });
      if (!r) throw notFound('Report not found.');
      await Reputation.audit.run(trx, {
        at: this.now(),
        actorId: user.id,
        action: 'withdraw',
        targetType: r.target_type,
        target: r.target,
        detail: JSON.stringify({ report_id: id, category: r.category }),
        clientIp,
      });
    });
  }

  /** The audit trail of one target (administrators). */
  async audit(target: Target) {
    const rows = await Reputation.auditOf.rows(this.knex, { targetType: target.type, target: target.value });
    return rows.map((r) => ({ at: new Date(r.at).toISOString(), actor: r.actor, action: r.action, detail: r.detail, client_ip: r.client_ip }));
  }
}

const round = (n: number) => Math.round(n * 1000) / 1000;
