import { randomBytes } from 'node:crypto';
import type { Knex } from '@mikro-orm/postgresql';
import type { FastifyBaseLogger } from 'fastify';
import type { AuthUser } from '../../accounts/types.js';
import type { Orm } from '../../db/orm.js';
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

interface BookRow {
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

interface EntryRow {
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
    return this.orm.em.getConnection().getKnex();
  }

  private async rows<T>(sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
    const { rows } = await this.knex.raw<{ rows: T[] }>(sql, bindings as Knex.RawBinding[]);
    return rows;
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

  private readonly bookSelect = `select g.*, u.username as owner,
      (select count(*) from guestbook_entries e where e.guestbook_id = g.id and e.status = 'pending') as pending,
      (select count(*) from guestbook_entries e where e.guestbook_id = g.id and e.status = 'published') as published
    from guestbooks g join users u on u.id = g.owner_id`;

  async listBooks(user: AuthUser) {
    const rows = await this.rows<BookRow>(`${this.bookSelect} where ? or g.owner_id = ? order by g.slug`, [user.isAdmin, user.id]);
    return rows.map((b) => this.presentBook(b));
  }

  /** The owner's guestbook (any for an administrator); 404 otherwise. */
  async book(user: AuthUser, id: number) {
    const [b] = await this.rows<BookRow>(`${this.bookSelect} where g.id = ? and (? or g.owner_id = ?)`, [id, user.isAdmin, user.id]);
    if (!b) throw notFound('Guestbook not found.');
    return this.presentBook(b);
  }

  async createBook(user: AuthUser, input: GuestbookInput) {
    if (input.spam_profile_id != null) {
      const [p] = await this.rows('select id from spam_profiles where id = ? and owner_id = ?', [input.spam_profile_id, user.id]);
      if (!p) throw validationFailed({ spam_profile_id: ['not one of your spam scoring profiles'] });
    }
    try {
      const [b] = await this.rows<BookRow>(
        'insert into guestbooks (owner_id, slug, title, description, hold_all, spam_profile_id) values (?, ?, ?, ?, ?, ?) returning *',
        [user.id, input.slug, input.title, input.description ?? '', input.hold_all ?? false, input.spam_profile_id ?? null],
      );
      return this.presentBook({ ...b!, owner: user.username });
    } catch (err) {
      throw slugTaken(err, input.slug);
    }
  }

  async updateBook(user: AuthUser, id: number, patch: Partial<Omit<GuestbookInput, 'slug'>>) {
    const book = await this.book(user, id);
    if (patch.spam_profile_id != null) {
      // The guestbook owner's profiles (an administrator editing someone's guestbook picks among the owner's).
      const [p] = await this.rows('select p.id from spam_profiles p join guestbooks g on g.owner_id = p.owner_id where p.id = ? and g.id = ?', [
        patch.spam_profile_id,
        book.id,
      ]);
      if (!p) throw validationFailed({ spam_profile_id: ["not one of the owner's spam scoring profiles"] });
    }
    await this.knex.raw('update guestbooks set title = ?, description = ?, hold_all = ?, spam_profile_id = ?, updated_at = now() where id = ?', [
      patch.title ?? book.title,
      patch.description ?? book.description,
      patch.hold_all ?? book.hold_all,
      patch.spam_profile_id !== undefined ? patch.spam_profile_id : book.spam_profile_id,
      book.id,
    ]);
    return this.book(user, id);
  }

  async deleteBook(user: AuthUser, id: number) {
    const book = await this.book(user, id);
    await this.knex.raw('delete from guestbooks where id = ?', [book.id]);
  }

  async entries(user: AuthUser, id: number, status?: EntryStatus) {
    const book = await this.book(user, id);
    const rows = await this.rows<EntryRow>(
      `select e.*, u.username as moderated_by_name from guestbook_entries e left join users u on u.id = e.moderated_by
        where e.guestbook_id = ? and (?::text is null or e.status = ?) order by e.created_at desc, e.id desc limit 500`,
      [book.id, status ?? null, status ?? null],
    );
    return { book, entries: rows.map(presentModerated) };
  }

  async moderate(user: AuthUser, id: number, entryId: number, action: 'approve' | 'reject' | 'delete') {
    const book = await this.book(user, id);
    if (action === 'delete') {
      const [gone] = await this.rows('delete from guestbook_entries where id = ? and guestbook_id = ? returning id', [entryId, book.id]);
      if (!gone) throw notFound('Entry not found.');
      return null;
    }
    const [e] = await this.rows<EntryRow>(
      `update guestbook_entries set status = ?, moderated_at = now(), moderated_by = ? where id = ? and guestbook_id = ?
        returning *, (select username from users where id = ?) as moderated_by_name`,
      [action === 'approve' ? 'published' : 'rejected', user.id, entryId, book.id, user.id],
    );
    if (!e) throw notFound('Entry not found.');
    return presentModerated(e);
  }

  // ---- public -------------------------------------------------------------------------------------------

  private async publicBook(slug: string): Promise<BookRow> {
    const [b] = await this.rows<BookRow>('select * from guestbooks where slug = ?', [slug]);
    if (!b) throw notFound('Guestbook not found.');
    return b;
  }

  async published(slug: string, page: { limit: number; offset: number }) {
    const b = await this.publicBook(slug);
    const [entries, [count]] = await Promise.all([
      this.rows<EntryRow>(
        `select id, name, message, created_at from guestbook_entries where guestbook_id = ? and status = 'published'
          order by created_at desc, id desc limit ? offset ?`,
        [b.id, page.limit, page.offset],
      ),
      this.rows<{ n: string }>(`select count(*) as n from guestbook_entries where guestbook_id = ? and status = 'published'`, [b.id]),
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
    await this.knex.raw(
      `insert into guestbook_entries (guestbook_id, name, message, status, spam_status, spam_score, spam_threshold, spam_verdict, spam_rules, client_ip)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?)`,
      [
        book.id,
        entry.name,
        entry.message,
        status,
        analysis ? analysis.status : 'unavailable',
        analysis?.score ?? null,
        analysis?.threshold ?? null,
        analysis?.verdict ?? null,
        JSON.stringify(analysis?.rules ?? []),
        clientIp,
      ],
    );
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
