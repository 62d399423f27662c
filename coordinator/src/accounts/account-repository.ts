import type { EntityManager } from '@mikro-orm/postgresql';
import { DnsApiKey, DnsIpWhitelistEntry, DnsZonePermission, PersonalAccessToken, User } from './entities.js';

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

  findToken(em: EntityManager, id: number) {
    return em.findOne(PersonalAccessToken, { id }, { populate: ['user'] });
  }

  findDnsKeyByHash(em: EntityManager, keyHash: string) {
    return em.findOne(DnsApiKey, { keyHash }, { populate: ['user'] });
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
    await em
      .getConnection()
      .execute(`update ${table} set last_used_at = now() where id = ? and (last_used_at is null or last_used_at < now() - interval '60 seconds')`, [id]);
  }
}
