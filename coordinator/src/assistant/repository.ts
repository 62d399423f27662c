import type { Orm } from '../db/orm.js';

export interface SetupRow {
  id: number;
  slug: string;
  display_name: string;
  client_id: string;
  credential_kind: 'secret' | 'certificate';
  credential_enc: string;
  redirect_uri: string;
  graph_url: string;
  authority_host: string;
  scopes: string[];
  time_zone: string;
  created_at: Date;
  updated_at: Date;
}

export type ConnectionStatus = 'ready' | 'reconnect_required' | 'licence_missing' | 'invalid';

export interface ConnectionRow {
  id: number;
  user_id: number;
  setup_id: number;
  status: ConnectionStatus;
  home_account_id: string | null;
  tenant_id: string | null;
  username: string | null;
  token_cache_enc: string | null;
  last_validation: Validation | null;
  validated_at: Date | null;
  connected_at: Date | null;
  updated_at: Date;
}

/** The outcome of one validation of a token response (stored as the connection's last validation). */
export interface Validation {
  ok: boolean;
  code: string | null;
  message: string;
  tenant_id: string | null;
  missing_scopes: string[];
  at: string;
}

export interface PendingSignIn {
  user_id: number;
  setup_id: number;
  session_hash: string;
  verifier_enc: string;
  correlation_id: string;
}

/** SQL of the connector's tables (setups, delegations, connections, pending sign-ins). */
export class AssistantRepository {
  constructor(private readonly orm: Orm) {}

  private get db() {
    return this.orm.em.getConnection();
  }

  async setups(): Promise<SetupRow[]> {
    return this.db.execute<SetupRow[]>('select * from assistant_setups order by slug');
  }

  async setupBySlug(slug: string): Promise<SetupRow | null> {
    return (await this.db.execute<SetupRow[]>('select * from assistant_setups where slug = ?', [slug]))[0] ?? null;
  }

  async setupById(id: number): Promise<SetupRow | null> {
    return (await this.db.execute<SetupRow[]>('select * from assistant_setups where id = ?', [id]))[0] ?? null;
  }

  async insertSetup(s: Omit<SetupRow, 'id' | 'created_at' | 'updated_at'>): Promise<SetupRow> {
    const rows = await this.db.execute<SetupRow[]>(
      `insert into assistant_setups (slug, display_name, client_id, credential_kind, credential_enc, redirect_uri, graph_url, authority_host, scopes, time_zone)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?::text[], ?) on conflict (slug) do nothing returning *`,
      [
        s.slug,
        s.display_name,
        s.client_id,
        s.credential_kind,
        s.credential_enc,
        s.redirect_uri,
        s.graph_url,
        s.authority_host,
        toPgArray(s.scopes),
        s.time_zone,
      ],
    );
    return rows[0] as SetupRow;
  }

  async updateSetup(id: number, s: Omit<SetupRow, 'id' | 'created_at' | 'updated_at' | 'slug'>): Promise<void> {
    await this.db.execute(
      `update assistant_setups set display_name = ?, client_id = ?, credential_kind = ?, credential_enc = ?, redirect_uri = ?, graph_url = ?,
              authority_host = ?, scopes = ?::text[], time_zone = ?, updated_at = now() where id = ?`,
      [s.display_name, s.client_id, s.credential_kind, s.credential_enc, s.redirect_uri, s.graph_url, s.authority_host, toPgArray(s.scopes), s.time_zone, id],
    );
  }

  async delegate(setupId: number, userId: number): Promise<void> {
    await this.db.execute('insert into assistant_delegations (setup_id, user_id) values (?, ?) on conflict do nothing', [setupId, userId]);
  }

  async undelegate(setupId: number, userId: number): Promise<void> {
    await this.db.execute('delete from assistant_delegations where setup_id = ? and user_id = ?', [setupId, userId]);
  }

  async delegates(setupId: number): Promise<Array<{ id: number; username: string }>> {
    return this.db.execute('select u.id, u.username from assistant_delegations d join users u on u.id = d.user_id where d.setup_id = ? order by u.username', [
      setupId,
    ]);
  }

  async delegatedSetupIds(userId: number): Promise<number[]> {
    const rows = await this.db.execute<Array<{ setup_id: number }>>('select setup_id from assistant_delegations where user_id = ?', [userId]);
    return rows.map((r) => r.setup_id);
  }

  async connection(userId: number, setupId: number): Promise<ConnectionRow | null> {
    return (await this.db.execute<ConnectionRow[]>('select * from assistant_connections where user_id = ? and setup_id = ?', [userId, setupId]))[0] ?? null;
  }

  /** The user's most recently connected connection (the default of POST /api/ai/assistant/respond). */
  async latestConnection(userId: number): Promise<ConnectionRow | null> {
    return (
      (
        await this.db.execute<ConnectionRow[]>('select * from assistant_connections where user_id = ? order by connected_at desc nulls last, id desc limit 1', [
          userId,
        ])
      )[0] ?? null
    );
  }

  async connectionsOf(userId: number): Promise<ConnectionRow[]> {
    return this.db.execute<ConnectionRow[]>('select * from assistant_connections where user_id = ?', [userId]);
  }

  async upsertConnection(c: {
    userId: number;
    setupId: number;
    status: ConnectionStatus;
    homeAccountId: string | null;
    tenantId: string | null;
    username: string | null;
    validation: Validation;
  }): Promise<void> {
    await this.db.execute(
      `insert into assistant_connections (user_id, setup_id, status, home_account_id, tenant_id, username, last_validation, validated_at, connected_at)
       values (?, ?, ?, ?, ?, ?, ?::jsonb, now(), now())
       on conflict (user_id, setup_id) do update set status = excluded.status, home_account_id = excluded.home_account_id,
         tenant_id = excluded.tenant_id, username = excluded.username, last_validation = excluded.last_validation,
         validated_at = now(), connected_at = now(), updated_at = now()`,
      [c.userId, c.setupId, c.status, c.homeAccountId, c.tenantId, c.username, JSON.stringify(c.validation)],
    );
  }

  async setStatus(userId: number, setupId: number, status: ConnectionStatus, validation: Validation): Promise<void> {
    await this.db.execute(
      'update assistant_connections set status = ?, last_validation = ?::jsonb, validated_at = now(), updated_at = now() where user_id = ? and setup_id = ?',
      [status, JSON.stringify(validation), userId, setupId],
    );
  }

  async tokenCache(userId: number, setupId: number): Promise<string | null> {
    const rows = await this.db.execute<Array<{ token_cache_enc: string | null }>>(
      'select token_cache_enc from assistant_connections where user_id = ? and setup_id = ?',
      [userId, setupId],
    );
    return rows[0]?.token_cache_enc ?? null;
  }

  /** Stores the cache; creates the connection row (status `invalid` until validated) when there is none yet. */
  async saveTokenCache(userId: number, setupId: number, sealed: string): Promise<void> {
    await this.db.execute(
      `insert into assistant_connections (user_id, setup_id, status, token_cache_enc) values (?, ?, 'invalid', ?)
       on conflict (user_id, setup_id) do update set token_cache_enc = excluded.token_cache_enc, updated_at = now()`,
      [userId, setupId, sealed],
    );
  }

  async addPendingSignIn(stateHash: string, p: PendingSignIn, ttlSeconds: number): Promise<void> {
    await this.db.execute('delete from assistant_auth_requests where expires_at < now()');
    await this.db.execute(
      `insert into assistant_auth_requests (state_hash, session_hash, user_id, setup_id, verifier_enc, correlation_id, expires_at)
       values (?, ?, ?, ?, ?, ?, now() + make_interval(secs => ?))`,
      [stateHash, p.session_hash, p.user_id, p.setup_id, p.verifier_enc, p.correlation_id, ttlSeconds],
    );
  }

  /** Removes and returns the pending sign-in of a state (single use); null when unknown or expired. */
  async takePendingSignIn(stateHash: string): Promise<PendingSignIn | null> {
    const rows = await this.db.execute<Array<PendingSignIn & { expired: boolean }>>(
      `delete from assistant_auth_requests where state_hash = ?
       returning user_id, setup_id, session_hash, verifier_enc, correlation_id, expires_at < now() as expired`,
      [stateHash],
    );
    const row = rows[0];
    return row && !row.expired ? row : null;
  }

  async userByName(username: string): Promise<{ id: number; username: string } | null> {
    return (await this.db.execute<Array<{ id: number; username: string }>>('select id, username from users where username = ?', [username]))[0] ?? null;
  }
}

function toPgArray(values: string[]): string {
  return `{${values.map((v) => `"${v.replace(/["\\]/g, '\\$&')}"`).join(',')}}`;
}
