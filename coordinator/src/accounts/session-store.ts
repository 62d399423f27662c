import type { Session } from 'fastify';
import type { SessionStore } from '@fastify/session';
import type { Orm } from '../db/orm.js';
import { dbOf } from '../db/sql.js';
import { WebSessions } from './account-repository.js';
import { sha256Hex } from './secrets.js';

type Callback = (err?: unknown) => void;

/**
 * @fastify/session store on PostgreSQL, so sessions survive restarts and are shared by every
 * coordinator. Rows are keyed by the SHA-256 of the session id: a leaked table holds no live cookies.
 */
export class PgSessionStore implements SessionStore {
  constructor(
    private readonly orm: Orm,
    private readonly defaultTtlMs: number,
  ) {}

  private get db() {
    return dbOf(this.orm.em);
  }

  set(sessionId: string, session: Session, callback: Callback): void {
    const cookie = (session as { cookie?: { expires?: string | Date | null } }).cookie;
    const expires = cookie?.expires ? new Date(cookie.expires) : new Date(Date.now() + this.defaultTtlMs);
    const userId = typeof session.userId === 'number' ? session.userId : null;
    WebSessions.save.run(this.db, { idHash: sha256Hex(sessionId), data: JSON.stringify(session), userId, expiresAt: expires }).then(() => callback(), callback);
  }

  get(sessionId: string, callback: (err: unknown, session?: Session | null) => void): void {
    WebSessions.live.rows(this.db, { idHash: sha256Hex(sessionId) }).then(
      (rows) => callback(null, rows[0]?.data ?? null),
      (err: unknown) => callback(err),
    );
  }

  destroy(sessionId: string, callback: Callback): void {
    WebSessions.destroy.run(this.db, { idHash: sha256Hex(sessionId) }).then(() => callback(), callback);
  }

  /** Deletes expired rows; run periodically by the maintenance queue. */
  async purgeExpired(): Promise<number> {
    return WebSessions.purgeExpired.run(this.db, {});
  }
}
