import type { Knex } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm.js';
import { DYNDNS_TOKEN_PREFIX, newSecret, sha256Hex } from '../../accounts/secrets.js';

/** One host name a token may update, with its abuse state. */
export interface DyndnsHost {
  hostname: string;
  zone: string;
  lastIpv4: string | null;
  lastIpv6: string | null;
  lastUpdateAt: Date | null;
  nochgStreak: number;
  blockedUntil: Date | null;
}

export interface DyndnsToken {
  id: number;
  name: string;
  prefix: string;
  hostnames: string[];
  createdAt: Date;
  lastUsedAt: Date | null;
}

interface TokenRow {
  id: number;
  name: string;
  prefix: string;
  hostnames: string[] | null;
  created_at: Date;
  last_used_at: Date | null;
}

interface HostRow {
  hostname: string;
  zone: string;
  last_ipv4: string | null;
  last_ipv6: string | null;
  last_update_at: Date | null;
  nochg_streak: number;
  blocked_until: Date | null;
}

/**
 * The repository of dynamic-DNS tokens: 256-bit secrets (`sonar_ddns_…`) of which only the SHA-256
 * is stored, each bound to its owner and to the host names it may update.
 */
export class DyndnsTokens {
  constructor(private readonly orm: Orm) {}

  private get knex(): Knex {
    return this.orm.em.getConnection().getKnex();
  }

  /** The token's id and owner, or null when it is unknown or revoked (the auth plugin's verifier). */
  async verify(secret: string): Promise<{ tokenId: number; ownerId: number } | null> {
    const { rows } = await this.knex.raw<{ rows: Array<{ id: number; owner_id: number }> }>(
      `update dyndns_tokens set last_used_at = now() where token_hash = ? and revoked_at is null returning id, owner_id`,
      [sha256Hex(secret)],
    );
    const r = rows[0];
    return r ? { tokenId: Number(r.id), ownerId: Number(r.owner_id) } : null;
  }

  async create(ownerId: number, name: string, hosts: Array<{ hostname: string; zone: string }>): Promise<{ secret: string; token: DyndnsToken }> {
    const { secret, hash, displayPrefix } = newSecret(DYNDNS_TOKEN_PREFIX);
    const id = await this.knex.transaction(async (trx) => {
      const { rows } = await trx.raw<{ rows: Array<{ id: number }> }>(
        `insert into dyndns_tokens (owner_id, name, token_hash, prefix) values (?, ?, ?, ?) returning id`,
        [ownerId, name, hash, displayPrefix],
      );
      const tokenId = Number(rows[0]!.id);
      for (const h of hosts) await trx.raw(`insert into dyndns_hosts (token_id, hostname, zone) values (?, ?, ?)`, [tokenId, h.hostname, h.zone]);
      return tokenId;
    });
    return { secret, token: (await this.list(ownerId, id))[0]! };
  }

  /** The owner's live tokens (one when `id` is given), newest first. */
  async list(ownerId: number, id?: number): Promise<DyndnsToken[]> {
    const { rows } = await this.knex.raw<{ rows: TokenRow[] }>(
      `select t.id, t.name, t.prefix, t.created_at, t.last_used_at,
              array(select h.hostname from dyndns_hosts h where h.token_id = t.id order by h.hostname) as hostnames
         from dyndns_tokens t
        where t.owner_id = ? and t.revoked_at is null ${id === undefined ? '' : 'and t.id = ?'}
        order by t.id desc`,
      id === undefined ? [ownerId] : [ownerId, id],
    );
    return rows.map((r) => ({
      id: Number(r.id),
      name: r.name,
      prefix: r.prefix,
      hostnames: r.hostnames ?? [],
      createdAt: new Date(r.created_at),
      lastUsedAt: r.last_used_at ? new Date(r.last_used_at) : null,
    }));
  }

  async revoke(ownerId: number, id: number): Promise<boolean> {
    const { rows } = await this.knex.raw<{ rows: unknown[] }>(
      `update dyndns_tokens set revoked_at = now() where owner_id = ? and id = ? and revoked_at is null returning id`,
      [ownerId, id],
    );
    return rows.length > 0;
  }

  async hosts(tokenId: number): Promise<Map<string, DyndnsHost>> {
    const { rows } = await this.knex.raw<{ rows: HostRow[] }>(
      `select hostname, zone, last_ipv4, last_ipv6, last_update_at, nochg_streak, blocked_until from dyndns_hosts where token_id = ?`,
      [tokenId],
    );
    return new Map(
      rows.map((r) => [
        r.hostname,
        {
          hostname: r.hostname,
          zone: r.zone,
          lastIpv4: r.last_ipv4,
          lastIpv6: r.last_ipv6,
          lastUpdateAt: r.last_update_at ? new Date(r.last_update_at) : null,
          nochgStreak: Number(r.nochg_streak),
          blockedUntil: r.blocked_until ? new Date(r.blocked_until) : null,
        },
      ]),
    );
  }

  async saveHost(tokenId: number, h: DyndnsHost): Promise<void> {
    await this.knex.raw(
      `update dyndns_hosts set last_ipv4 = ?, last_ipv6 = ?, last_update_at = ?, nochg_streak = ?, blocked_until = ? where token_id = ? and hostname = ?`,
      [h.lastIpv4, h.lastIpv6, h.lastUpdateAt, h.nochgStreak, h.blockedUntil, tokenId, h.hostname],
    );
  }
}
