import { LockMode, type EntityManager } from '@mikro-orm/postgresql';
import type { Session } from 'fastify';
import { dbOf, sql, type Db } from '../db/sql.js';
import { DnsApiKey, DnsIpWhitelistEntry, DnsZonePermission, PersonalAccessToken, User } from './entities.js';

/** A DNS API key and its user as one plain row: the DNS API resolves a key on every request. */
const DNS_KEY_FOR_AUTH = sql<{ keyHash: string }, DnsKeyAuthRow>(
  `select k.id, k.expires_at, k.last_used_at, k.revoked_at, u.id as user_id, u.username, u.email, u.is_admin, u.permissions, u.disabled_at
     from dns_api_keys k left join users u on u.id = k.user_id where k.key_hash = :keyHash`,
);

/** Records use at most once a minute so busy tokens do not turn every request into a write. */
const TOUCH = {
  personal_access_tokens: sql<{ id: number }>(
    `update personal_access_tokens set last_used_at = now() where id = :id and (last_used_at is null or last_used_at < now() - interval '60 seconds')`,
  ),
  dns_api_keys: sql<{ id: number }>(
    `update dns_api_keys set last_used_at = now() where id = :id and (last_used_at is null or last_used_at < now() - interval '60 seconds')`,
  ),
};

/**
 * The web_sessions table (@fastify/session's store, PgSessionStore): rows keyed by the SHA-256 of
 * the session id. Ending a user's sessions (a password change, disabling) is a statement of it too.
 */
export const WebSessions = {
  save: sql<{ idHash: string; data: string; userId: number | null; expiresAt: Date }>(
    `insert into web_sessions (id_hash, data, user_id, expires_at, updated_at) values (:idHash, :data::jsonb, :userId, :expiresAt, now())
     on conflict (id_hash) do update set data = excluded.data, user_id = excluded.user_id,
       expires_at = excluded.expires_at, updated_at = now()`,
  ),
  live: sql<{ idHash: string }, { data: Session }>('select data from web_sessions where id_hash = :idHash and expires_at > now()'),
  destroy: sql<{ idHash: string }>('delete from web_sessions where id_hash = :idHash'),
  purgeExpired: sql<Record<string, never>>('delete from web_sessions where expires_at <= now()'),
  endAllOf: sql<{ userId: number }>('delete from web_sessions where user_id = :userId'),
};

/** Queries over account tables. Each method takes the unit of work (EntityManager) it runs in. */
export class AccountRepository {
  findUserById(em: EntityManager, id: number) {
    return em.findOne(User, { id });
  }

  findUserByUsername(em: EntityManager, username: string) {
    return em.createQueryBuilder(User, 'u').select('*').where('lower(u.username) = lower(?)', [username]).getSingleResult();
  }

  listUsers(em: EntityManager) {
    return em.find(User, {}, { orderBy: { id: 'asc' } });
  }

  countAdmins(em: EntityManager) {
    return em.count(User, { isAdmin: true, disabledAt: null });
  }

  findTokenByHash(em: EntityManager, tokenHash: string) {
    return em.findOne(PersonalAccessToken, { tokenHash }, { populate: ['user'] });
  }

  listTokens(em: EntityManager, userId: number) {
    return em.find(PersonalAccessToken, { user: userId }, { orderBy: { id: 'desc' } });
  }

  /** The user row, locked until the transaction ends: serialises changes to one user's tokens. */
  lockUser(em: EntityManager, id: number) {
    return em.findOne(User, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  }

  /** The user's tokens called `name` that are not revoked (expired ones included). */
  unrevokedTokensNamed(em: EntityManager, userId: number, name: string) {
    return em.find(PersonalAccessToken, { user: userId, name, revokedAt: null }, { orderBy: { id: 'asc' } });
  }

  findToken(em: EntityManager, id: number) {
    return em.findOne(PersonalAccessToken, { id }, { populate: ['user'] });
  }

  /** A DNS API key and its user as one plain row (no entities): the DNS API resolves a key on every request. */
  dnsKeyForAuth(em: EntityManager, keyHash: string): Promise<DnsKeyAuthRow | null> {
    return DNS_KEY_FOR_AUTH.first(dbOf(em), { keyHash });
  }

  listDnsKeys(em: EntityManager) {
    return em.find(DnsApiKey, {}, { populate: ['user'], orderBy: { id: 'asc' } });
  }

  findDnsKey(em: EntityManager, id: number) {
    return em.findOne(DnsApiKey, { id });
  }

  listWhitelist(em: EntityManager) {
    return em.find(DnsIpWhitelistEntry, {}, { orderBy: { id: 'asc' } });
  }

  findWhitelistEntry(em: EntityManager, cidr: string) {
    return em.findOne(DnsIpWhitelistEntry, { cidr });
  }

  listZonePermissions(em: EntityManager, userId: number) {
    return em.find(DnsZonePermission, { user: userId }, { orderBy: { zone: 'asc' } });
  }

  findZonePermission(em: EntityManager, userId: number, zone: string) {
    return em.findOne(DnsZonePermission, { user: userId, zone });
  }

  /** Records use at most once a minute so busy tokens do not turn every request into a write. */
  async touchToken(em: EntityManager, table: 'personal_access_tokens' | 'dns_api_keys', id: number) {
    await TOUCH[table].run(dbOf(em), { id });
  }

  /** Ends every browser session of the user (a password change, disabling). */
  async endSessionsOf(db: Db, userId: number): Promise<void> {
    await WebSessions.endAllOf.run(db, { userId });
  }
}

export interface DnsKeyAuthRow {
  id: number;
  expires_at: Date | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
  user_id: number | null;
  username: string | null;
  email: string | null;
  is_admin: boolean | null;
  permissions: string[] | null;
  disabled_at: Date | null;
}
