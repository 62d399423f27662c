import { randomBytes } from 'node:crypto';
import type { Knex } from '@mikro-orm/postgresql';
import type { FastifyBaseLogger } from 'fastify';
import type { AuthUser } from '../../accounts/types.js';
import type { Orm } from '../../db/orm.js';
import { dbOf } from '../../db/sql.js';
import { Guestbooks as G } from './guestbook-repository.js';
import { AppError, notFound, validationFailed } from '../../http/errors.js';
import type { Analysis, SpamService } from '../spam/spam-service.js';
import { slugTaken } from '../statuspage/statuspage-service.js';

export type EntryStatus = 'pending' | 'published' | 'rejected';
export type SpamStatus = 'ok' | 'degraded' | 'unavailable';

export interface GuestbookInput {
  slug: string;
  title: string;
  description?: string | undefined;
  hold_all?: boolean | undefined;
  spam_profile_id?: number | null | undefined;
}

export interface Submission {
  name: string;
  message: string;
  /** The honeypot: people leave it empty (it is hidden), form-filling robots do not. */
  website?: string | undefined;
}

export interface BookRow {
  id: number;
  owner_id: number;
  slug: string;
  title: string;
  description: string;
  hold_all: boolean;
  spam_profile_id: number | null;
  created_at: Date;
  owner?: string;
  pending?: string;
  published?: string;
}

export interface EntryRow {
  id: number;
  guestbook_id: number;
  name: string;
  message: string;
  status: EntryStatus;
  spam_status: SpamStatus;
  spam_score: number | null;
  spam_threshold: number | null;
  spam_verdict: 'spam' | 'ham' | null;
  spam_rules: Analysis['rules'];
  client_ip: string | null;
  moderated_at: Date | null;
  moderated_by_name: string | null;
  created_at: Date;
}

const isoOf = (d: Date) => new Date(d).toISOString();

/** A header value: RFC 2047 encoded-word when it is not plain ASCII, one line either way. */
function headerText(v: string): string {
  // eslint-disable-next-line no-control-regex
  const line = v.replace(/[\u0000-\u001f\u007f"<>]+/g, ' ').trim();
  return /^[\u0020-\u007e]*$/.test(line) ? line : `=?UTF-8?B?${Buffer.from(line, 'utf8').toString('base64')}?=`;
}

/**
 * A guestbook entry as the e-mail message spamd scores: the visitor's name as the sender's display
 * name, the entry as the text body, with the Date and Message-ID headers any real message has (so
 * their absence scores nothing).
 */
export function entryMessage(book: { slug: string }, entry: Submission, now: Date): string {
  const id = randomBytes(8).toString('hex');
  return [
    `From: "${headerText(entry.name)}" <guestbook-visitor@guestbook.sonar.invalid>`,
    `To: guestbook-${book.slug}@guestbook.sonar.invalid`,
    `Subject: Guestbook entry on ${book.slug}`,
    `Date: ${now.toUTCString().replace('GMT', '+0000')}`,
    `Message-ID: <${id}.${now.getTime()}@guestbook.sonar.invalid>`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: 8bit',
    '',
    entry.message,
    '',
  ].join('\n');
}

/**
 * Guestbooks (a platform endpoint): owners create them; visitors submit entries on the public form or the
 * JSON route. Every entry is scored by the spam analyzer of POST /api/spam/analyze (real spamd) with
 * the owner's profile when the guestbook names one. The publication rule: an entry scored ham
 * (status `ok` or `degraded`) is published at once, unless the guestbook holds every entry for
 * moderation (`hold_all`); an entry scored spam, or one that could not be scored (spamd
 * unavailable), is held (`pending`) for the owner — nothing is ever published unscored. A filled
 * honeypot answers like a held entry and stores nothing.
 */
export class GuestbookService {
  constructor(
    private readonly orm: Orm,
    private readonly spam: SpamService,
    private readonly now: () => Date = () => new Date(),
  ) {}

  private get knex(): Knex {
    return dbOf(this.orm.em);
  }

  // ---- owners -------------------------------------------------------------------------------------------

  private presentBook(b: BookRow) {
    return {
      id: Number(b.id),
      slug: b.slug,
      title: b.title,
      description: b.description,
      hold_all: b.hold_all,
      spam_profile_id: b.spam_profile_id === null ? null : Number(b.spam_profile_id),
      owner: b.owner ?? '',
      pending: Number(b.pending ?? 0),
      published: Number(b.published ?? 0),
      created_at: isoOf(b.created_at),
    };
  }

  async listBooks(user: AuthUser) {
    const rows = await G.listFor.rows(this.knex, { isAdmin: user.isAdmin, userId: user.id });
    return rows.map((b) => this.presentBook(b));
  }

  /** The owner's guestbook (any for an administrator); 404 otherwise. */
  async book(user: AuthUser, id: number) {
    const b = await G.managed.first(this.knex, { id, isAdmin: user.isAdmin, userId: user.id });
    if (!b) throw notFound('Guestbook not found.');
    return this.presentBook(b);
  }

  async createBook(user: AuthUser, input: GuestbookInput) {
    if (input.spam_profile_id != null) {
      const p = await G.ownProfile.first(this.knex, { id: input.spam_profile_id, ownerId: user.id });
      if (!p) throw validationFailed({ spam_profile_id: ['not one of your spam scoring profiles'] });
    }
    try {
      const b = await G.create.first(this.knex, {
        ownerId: user.id,
        slug: input.slug,
        title: input.title,
        description: input.description ?? '',
        holdAll: input.hold_all ?? false,
        spamProfileId: input.spam_profile_id ?? null,
      });
      return this.presentBook({ ...b!, owner: user.username });
    } catch (err) {
      throw slugTaken(err, input.slug);
    }
  }

  async updateBook(user: AuthUser, id: number, patch: Partial<Omit<GuestbookInput, 'slug'>>) {
    const book = await this.book(user, id);
    if (patch.spam_profile_id != null) {
      // The guestbook owner's profiles (an administrator editing someone's guestbook picks among the owner's).
      const p = await G.ownersProfile.first(this.knex, { id: patch.spam_profile_id, bookId: book.id });
      if (!p) throw validationFailed({ spam_profile_id: ["not one of the owner's spam scoring profiles"] });
    }
    await G.update.run(this.knex, {
      title: patch.title ?? book.title,
      description: patch.description ?? book.description,
      holdAll: patch.hold_all ?? book.hold_all,
      spamProfileId: patch.spam_profile_id !== undefined ? patch.spam_profile_id : book.spam_profile_id,
      id: book.id,
    });
    return this.book(user, id);
  }

  async deleteBook(user: AuthUser, id: number) {
    const book = await this.book(user, id);
    await G.remove.run(this.knex, { id: book.id });
  }

  async entries(user: AuthUser, id: number, status?: EntryStatus) {
    const book = await this.book(user, id);
    const rows = await G.entries.rows(this.knex, { bookId: book.id, status: status ?? null });
    return { book, entries: rows.map(presentModerated) };
  }

  async moderate(user: AuthUser, id: number, entryId: number, action: 'approve' | 'reject' | 'delete') {
    const book = await this.book(user, id);
    if (action === 'delete') {
      const gone = await G.removeEntry.run(this.knex, { id: entryId, bookId: book.id });
      if (!gone) throw notFound('Entry not found.');
      return null;
    }
    const e = await G.moderate.first(this.knex, { status: action === 'approve' ? 'published' : 'rejected', userId: user.id, id: entryId, bookId: book.id });
    if (!e) throw notFound('Entry not found.');
    return presentModerated(e);
  }

  // ---- public -------------------------------------------------------------------------------------------

  private async publicBook(slug: string): Promise<BookRow> {
    const b = await G.bySlug.first(this.knex, { slug });
    if (!b) throw notFound('Guestbook not found.');
    return b;
  }

  async published(slug: string, page: { limit: number; offset: number }) {
    const b = await this.publicBook(slug);
    const [entries, count] = await Promise.all([
      G.published.rows(this.knex, { bookId: b.id, limit: page.limit, offset: page.offset }),
      G.publishedCount.first(this.knex, { bookId: b.id }),
    ]);
    return {
      guestbook: { slug: b.slug, title: b.title, description: b.description },
      total: Number(count?.n ?? 0),
      entries: entries.map((e) => ({ id: Number(e.id), name: e.name, message: e.message, created_at: isoOf(e.created_at) })),
    };
  }

  /** A visitor's entry: scored, then published or held by the rule above. The answer never says why an entry was held. */
  async submit(slug: string, entry: Submission, clientIp: string, log: FastifyBaseLogger): Promise<{ status: 'published' | 'pending' }> {
    const book = await this.publicBook(slug);
    if (entry.website?.trim()) {
      log.info({ guestbook: book.slug }, 'guestbook honeypot filled: entry dropped');
      return { status: 'pending' };
    }
    let analysis: Analysis | null = null;
    try {
      analysis = await this.spam.analyze(book.owner_id, { message: entryMessage(book, entry, this.now()) }, book.spam_profile_id ?? undefined);
    } catch (err) {
      if (!(err instanceof AppError) || err.reason !== 'service_unavailable') throw err;
      log.warn({ guestbook: book.slug, why: err.message }, 'guestbook entry held: spam scoring unavailable');
    }
    const status: EntryStatus = analysis && analysis.verdict === 'ham' && !book.hold_all ? 'published' : 'pending';
    await G.addEntry.run(this.knex, {
      bookId: book.id,
      name: entry.name,
      message: entry.message,
      status,
      spamStatus: analysis ? analysis.status : 'unavailable',
      spamScore: analysis?.score ?? null,
      spamThreshold: analysis?.threshold ?? null,
      spamVerdict: analysis?.verdict ?? null,
      spamRules: JSON.stringify(analysis?.rules ?? []),
      clientIp,
    });
    return { status };
  }
}

const presentModerated = (e: EntryRow) => ({
  id: Number(e.id),
  name: e.name,
  message: e.message,
  status: e.status,
  spam: {
    status: e.spam_status,
    score: e.spam_score === null ? null : Number(e.spam_score),
    threshold: e.spam_threshold === null ? null : Number(e.spam_threshold),
    verdict: e.spam_verdict,
    rules: typeof e.spam_rules === 'string' ? (JSON.parse(e.spam_rules) as Analysis['rules']) : e.spam_rules,
  },
  client_ip: e.client_ip,
  moderated_at: e.moderated_at ? isoOf(e.moderated_at) : null,
  moderated_by: e.moderated_by_name,
  created_at: isoOf(e.created_at),
});
