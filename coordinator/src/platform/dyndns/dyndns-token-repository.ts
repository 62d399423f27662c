import type { Knex } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm.js';
import { dbOf, sql } from '../../db/sql.js';
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

const Q = {
  verify: sql<{ hash: string }, { id: number; owner_id: number }>(
    `update dyndns_tokens set last_used_at = now() where token_hash = :hash and revoked_at is null returning id, owner_id`,
  ),
  create: sql<{ ownerId: number; name: string; hash: string; prefix: string }, { id: number }>(
    `insert into dyndns_tokens (owner_id, name, token_hash, prefix) values (:ownerId, :name, :hash, :prefix) returning id`,
  ),
  addHost: sql<{ tokenId: number; hostname: string; zone: string }>(`insert into dyndns_hosts (token_id, hostname, zone) values (:tokenId, :hostname, :zone)`),
  /** The owner's live tokens, or the one of them with id `id` (null: all). */
  list: sql<{ ownerId: number; id: number | null }, TokenRow>(
    `select t.id, t.name, t.prefix, t.created_at, t.last_used_at,
            array(select h.hostname from dyndns_hosts h where h.token_id = t.id order by h.hostname) as hostnames
       from dyndns_tokens t
      where t.owner_id = :ownerId and t.revoked_at is null and (:id::int is null or t.id = :id)
      order by t.id desc`,
  ),
  revoke: sql<{ ownerId: number; id: number }>(`update dyndns_tokens set revoked_at = now() where owner_id = :ownerId and id = :id and revoked_at is null`),
  hosts: sql<{ tokenId: number }, HostRow>(
    `select hostname, zone, last_ipv4, last_ipv6, last_update_at, nochg_streak, blocked_until from dyndns_hosts where token_id = :tokenId`,
  ),
  saveHost: sql<{
    tokenId: number;
    hostname: string;
    lastIpv4: string | null;
    lastIpv6: string | null;
    lastUpdateAt: Date | null;
    nochgStreak: number;
    blockedUntil: Date | null;
  }>(
    `update dyndns_hosts set last_ipv4 = :lastIpv4, last_ipv6 = :lastIpv6, last_update_at = :lastUpdateAt, nochg_streak = :nochgStreak,
            blocked_until = :blockedUntil where token_id = :tokenId and hostname = :hostname`,
  ),
};

/**
 * The repository of dynamic-DNS tokens: 256-bit secrets (`sonar_ddns_…`) of which only the SHA-256
 * is stored, each bound to its owner and to the host names it may update.
 */
export class DyndnsTokens {
  constructor(private readonly orm: Orm) {}

  private get knex(): Knex {
    return dbOf(this.orm.em);
  }

  /** The token's id and owner, or null when it is unknown or revoked (the auth plugin's verifier). */
  async verify(secret: string): Promise<{ tokenId: number; ownerId: number } | null> {
    const r = await Q.verify.first(this.knex, { hash: sha256Hex(secret) });
    return r ? { tokenId: Number(r.id), ownerId: Number(r.owner_id) } : null;
  }

  async create(ownerId: number, name: string, hosts: Array<{ hostname: string; zone: string }>): Promise<{ secret: string; token: DyndnsToken }> {
    const { secret, hash, displayPrefix } = newSecret(DYNDNS_TOKEN_PREFIX);
    const id = await this.knex.transaction(async (trx) => {
      const tokenId = Number((await Q.create.first(trx, { ownerId, name, hash, prefix: displayPrefix }))!.id);
      for (const h of hosts) await Q.addHost.run(trx, { tokenId, hostname: h.hostname, zone: h.zone });
      return tokenId;
    });
    return { secret, token: (await this.list(ownerId, id))[0]! };
  }

  /** The owner's live tokens (one when `id` is given), newest first. */
  async list(ownerId: number, id?: number): Promise<DyndnsToken[]> {
    const rows = await Q.list.rows(this.knex, { ownerId, id: id ?? null });
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
    return (await Q.revoke.run(this.knex, { ownerId, id })) > 0;
  }

  async hosts(tokenId: number): Promise<Map<string, DyndnsHost>> {
    const rows = await Q.hosts.rows(this.knex, { tokenId });
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
    await Q.saveHost.run(this.knex, {
      tokenId,
      hostname: h.hostname,
      lastIpv4: h.lastIpv4,
      lastIpv6: h.lastIpv6,
      lastUpdateAt: h.lastUpdateAt,
      nochgStreak: h.nochgStreak,
      blockedUntil: h.blockedUntil,
    });
  }
}
