/** The SQL of guestbooks (guestbook-service.ts): books, their entries and moderation. */
import { sql } from '../../db/sql.js';
import type { BookRow, EntryRow } from './guestbook-service.js';

/** A book with its owner's name and its pending and published counts. */
const BOOK_SELECT = `select g.*, u.username as owner,
    (select count(*) from guestbook_entries e where e.guestbook_id = g.id and e.status = 'pending') as pending,
    (select count(*) from guestbook_entries e where e.guestbook_id = g.id and e.status = 'published') as published
  from guestbooks g join users u on u.id = g.owner_id`;

type Viewer = { isAdmin: boolean; userId: number };

export const Guestbooks = {
  listFor: sql<Viewer, BookRow>(`${BOOK_SELECT} where :isAdmin or g.owner_id = :userId order by g.slug`),
  /** The owner's guestbook (any for an administrator). */
  managed: sql<Viewer & { id: number }, BookRow>(`${BOOK_SELECT} where g.id = :id and (:isAdmin or g.owner_id = :userId)`),
  ownProfile: sql<{ id: number; ownerId: number }, { id: number }>('select id from spam_profiles where id = :id and owner_id = :ownerId'),
  /** A spam profile of the guestbook's owner. */
  ownersProfile: sql<{ id: number; bookId: number }, { id: number }>(
    'select p.id from spam_profiles p join guestbooks g on g.owner_id = p.owner_id where p.id = :id and g.id = :bookId',
  ),
  create: sql<{ ownerId: number; slug: string; title: string; description: string; holdAll: boolean; spamProfileId: number | null }, BookRow>(
    `insert into guestbooks (owner_id, slug, title, description, hold_all, spam_profile_id)
     values (:ownerId, :slug, :title, :description, :holdAll, :spamProfileId) returning *`,
  ),
  update: sql<{ id: number; title: string; description: string; holdAll: boolean; spamProfileId: number | null }>(
    'update guestbooks set title = :title, description = :description, hold_all = :holdAll, spam_profile_id = :spamProfileId, updated_at = now() where id = :id',
  ),
  remove: sql<{ id: number }>('delete from guestbooks where id = :id'),
  entries: sql<{ bookId: number; status: string | null }, EntryRow>(
    `select e.*, u.username as moderated_by_name from guestbook_entries e left join users u on u.id = e.moderated_by
      where e.guestbook_id = :bookId and (:status::text is null or e.status = :status) order by e.created_at desc, e.id desc limit 500`,
  ),
  removeEntry: sql<{ id: number; bookId: number }>('delete from guestbook_entries where id = :id and guestbook_id = :bookId'),
  moderate: sql<{ id: number; bookId: number; status: string; userId: number }, EntryRow>(
    `update guestbook_entries set status = :status, moderated_at = now(), moderated_by = :userId where id = :id and guestbook_id = :bookId
      returning *, (select username from users where id = :userId) as moderated_by_name`,
  ),
  bySlug: sql<{ slug: string }, BookRow>('select * from guestbooks where slug = :slug'),
  published: sql<{ bookId: number; limit: number; offset: number }, EntryRow>(
    `select id, name, message, created_at from guestbook_entries where guestbook_id = :bookId and status = 'published'
      order by created_at desc, id desc limit :limit offset :offset`,
  ),
  publishedCount: sql<{ bookId: number }, { n: string }>(`select count(*) as n from guestbook_entries where guestbook_id = :bookId and status = 'published'`),
  addEntry: sql<{
    bookId: number;
    name: string;
    message: string;
    status: string;
    spamStatus: string;
    spamScore: number | null;
    spamThreshold: number | null;
    spamVerdict: string | null;
    spamRules: string;
    clientIp: string;
  }>(
    `insert into guestbook_entries (guestbook_id, name, message, status, spam_status, spam_score, spam_threshold, spam_verdict, spam_rules, client_ip)
     values (:bookId, :name, :message, :status, :spamStatus, :spamScore, :spamThreshold, :spamVerdict, :spamRules::jsonb, :clientIp)`,
  ),
};
