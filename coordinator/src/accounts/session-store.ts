import type { Session } from 'fastify';
import type { SessionStore } from '@fastify/session';
import type { Orm } from '../db/orm.js';
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

  private get conn() {
    return this.orm.em.getConnection();
  }

  set(sessionId: string, session: Session, callback: Callback): void {
    const cookie = (session as { cookie?: { expires?: string | Date | null } }).cookie;
    const expires = cookie?.expires ? new Date(cookie.expires) : new Date(Date.now() + this.defaultTtlMs);
    const userId = typeof session.userId === 'number' ? session.userId : null;
    this.conn
      .execute(
        `insert into web_sessions (id_hash, data, user_id, expires_at, updated_at) values (?, ?::jsonb, ?, ?, now())
         on conflict (id_hash) do update set data = excluded.data, user_id = excluded.user_id,
           expires_at = excluded.expires_at, updated_at = now()`,
        [sha256Hex(sessionId), JSON.stringify(session), userId, expires],
      )
      .then(() => callback(), callback);
  }

  get(sessionId: string, callback: (err: unknown, session?: Session | null) => void): void {
    this.conn.execute<Array<{ data: Session }>>('select data from web_sessions where id_hash = ? and expires_at > now()', [sha256Hex(sessionId)]).then(
      (rows) => callback(null, rows[0]?.data ?? null),
      (err: unknown) => callback(err),
    );
  }

  destroy(sessionId: string, callback: Callback): void {
    this.conn.execute('delete from web_sessions where id_hash = ?', [sha256Hex(sessionId)]).then(() => callback(), callback);
  }

  /** Deletes expired rows; run periodically by the maintenance queue. */
  async purgeExpired(): Promise<number> {
    const res = await this.conn.execute<{ affectedRows?: number }>('delete from web_sessions where expires_at <= now()', [], 'run');
    return res.affectedRows ?? 0;
  }
}
