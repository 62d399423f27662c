import type { Orm } from '../db/orm.js';
import { dbOf, sql } from '../db/sql.js';
import type { AuditRow } from './audit-log.js';

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

type SetupFields = Omit<SetupRow, 'id' | 'created_at' | 'updated_at'>;
type PendingRow = PendingSignIn & { expired: boolean };

const Q = {
  setups: sql<Record<string, never>, SetupRow>('select * from assistant_setups order by slug'),
  setupBySlug: sql<{ slug: string }, SetupRow>('select * from assistant_setups where slug = :slug'),
  setupById: sql<{ id: number }, SetupRow>('select * from assistant_setups where id = :id'),
  insertSetup: sql<Omit<SetupFields, 'scopes'> & { scopes: string }, SetupRow>(
    `insert into assistant_setups (slug, display_name, client_id, credential_kind, credential_enc, redirect_uri, graph_url, authority_host, scopes, time_zone)
     values (:slug, :display_name, :client_id, :credential_kind, :credential_enc, :redirect_uri, :graph_url, :authority_host, :scopes::text[], :time_zone)
     on conflict (slug) do nothing returning *`,
  ),
  updateSetup: sql<Omit<SetupFields, 'scopes' | 'slug'> & { scopes: string; id: number }>(
    `update assistant_setups set display_name = :display_name, client_id = :client_id, credential_kind = :credential_kind, credential_enc = :credential_enc,
            redirect_uri = :redirect_uri, graph_url = :graph_url, authority_host = :authority_host, scopes = :scopes::text[], time_zone = :time_zone,
            updated_at = now() where id = :id`,
  ),
  delegate: sql<{ setupId: number; userId: number }>('insert into assistant_delegations (setup_id, user_id) values (:setupId, :userId) on conflict do nothing'),
  undelegate: sql<{ setupId: number; userId: number }>('delete from assistant_delegations where setup_id = :setupId and user_id = :userId'),
  delegates: sql<{ setupId: number }, { id: number; username: string }>(
    'select u.id, u.username from assistant_delegations d join users u on u.id = d.user_id where d.setup_id = :setupId order by u.username',
  ),
  delegatedSetupIds: sql<{ userId: number }, { setup_id: number }>('select setup_id from assistant_delegations where user_id = :userId'),
  connection: sql<{ userId: number; setupId: number }, ConnectionRow>('select * from assistant_connections where user_id = :userId and setup_id = :setupId'),
  latestConnection: sql<{ userId: number }, ConnectionRow>(
    'select * from assistant_connections where user_id = :userId order by connected_at desc nulls last, id desc limit 1',
  ),
  connectionsOf: sql<{ userId: number }, ConnectionRow>('select * from assistant_connections where user_id = :userId'),
  upsertConnection: sql<{
    userId: number;
    setupId: number;
    status: ConnectionStatus;
    homeAccountId: string | null;
    tenantId: string | null;
    username: string | null;
    validation: string;
  }>(
    `insert into assistant_connections (user_id, setup_id, status, home_account_id, tenant_id, username, last_validation, validated_at, connected_at)
     values (:userId, :setupId, :status, :homeAccountId, :tenantId, :username, :validation::jsonb, now(), now())
     on conflict (user_id, setup_id) do update set status = excluded.status, home_account_id = excluded.home_account_id,
       tenant_id = excluded.tenant_id, username = excluded.username, last_validation = excluded.last_validation,
       validated_at = now(), connected_at = now(), updated_at = now()`,
  ),
  setStatus: sql<{ status: ConnectionStatus; validation: string; userId: number; setupId: number }>(
    `update assistant_connections set status = :status, last_validation = :validation::jsonb, validated_at = now(), updated_at = now()
      where user_id = :userId and setup_id = :setupId`,
  ),
  tokenCache: sql<{ userId: number; setupId: number }, { token_cache_enc: string | null }>(
    'select token_cache_enc from assistant_connections where user_id = :userId and setup_id = :setupId',
  ),
  saveTokenCache: sql<{ userId: number; setupId: number; sealed: string }>(
    `insert into assistant_connections (user_id, setup_id, status, token_cache_enc) values (:userId, :setupId, 'invalid', :sealed)
     on conflict (user_id, setup_id) do update set token_cache_enc = excluded.token_cache_enc, updated_at = now()`,
  ),
  purgePending: sql<Record<string, never>>('delete from assistant_auth_requests where expires_at < now()'),
  addPending: sql<PendingSignIn & { stateHash: string; ttlSeconds: number }>(
    `insert into assistant_auth_requests (state_hash, session_hash, user_id, setup_id, verifier_enc, correlation_id, expires_at)
     values (:stateHash, :session_hash, :user_id, :setup_id, :verifier_enc, :correlation_id, now() + make_interval(secs => :ttlSeconds))`,
  ),
  takePending: sql<{ stateHash: string }, PendingRow>(
    `delete from assistant_auth_requests where state_hash = :stateHash
     returning user_id, setup_id, session_hash, verifier_enc, correlation_id, expires_at < now() as expired`,
  ),
  userByName: sql<{ username: string }, { id: number; username: string }>('select id, username from users where username = :username'),
  audit: sql<{
    action: string;
    result: string;
    userId: number | null;
    username: string | null;
    setupSlug: string | null;
    tenantId: string | null;
    correlationId: string | null;
    requestId: string | null;
    errorCode: string | null;
    detail: string | null;
  }>(
    `insert into assistant_audit (action, result, user_id, username, setup_slug, tenant_id, correlation_id, request_id, error_code, detail)
     values (:action, :result, :userId, :username, :setupSlug, :tenantId, :correlationId, :requestId, :errorCode, :detail)`,
  ),
  /** The audit log, newest first; a null filter matches every row. */
  auditList: sql<
    { action: string | null; userId: number | null; beforeId: number | null; limit: number },
    Omit<AuditRow, 'at' | 'id'> & { id: string | number; at: Date }
  >(
    `select * from assistant_audit
      where (:action::text is null or action = :action) and (:userId::int is null or user_id = :userId) and (:beforeId::bigint is null or id < :beforeId)
      order by id desc limit :limit`,
  ),
};

/** SQL of the connector's tables (setups, delegations, connections, pending sign-ins, the audit log). */
export class AssistantRepository {
  constructor(private readonly orm: Orm) {}

  private get db() {
    return dbOf(this.orm.em);
  }

  async setups(): Promise<SetupRow[]> {
    return Q.setups.rows(this.db, {});
  }

  async setupBySlug(slug: string): Promise<SetupRow | null> {
    return Q.setupBySlug.first(this.db, { slug });
  }

  async setupById(id: number): Promise<SetupRow | null> {
    return Q.setupById.first(this.db, { id });
  }

  async insertSetup(s: SetupFields): Promise<SetupRow> {
    return (await Q.insertSetup.first(this.db, { ...s, scopes: toPgArray(s.scopes) })) as SetupRow;
  }

  async updateSetup(id: number, s: Omit<SetupRow, 'id' | 'created_at' | 'updated_at' | 'slug'>): Promise<void> {
    await Q.updateSetup.run(this.db, { ...s, scopes: toPgArray(s.scopes), id });
  }

  async delegate(setupId: number, userId: number): Promise<void> {
    await Q.delegate.run(this.db, { setupId, userId });
  }

  async undelegate(setupId: number, userId: number): Promise<void> {
    await Q.undelegate.run(this.db, { setupId, userId });
  }

  async delegates(setupId: number): Promise<Array<{ id: number; username: string }>> {
    return Q.delegates.rows(this.db, { setupId });
  }

  async delegatedSetupIds(userId: number): Promise<number[]> {
    return (await Q.delegatedSetupIds.rows(this.db, { userId })).map((r) => r.setup_id);
  }

  async connection(userId: number, setupId: number): Promise<ConnectionRow | null> {
    return Q.connection.first(this.db, { userId, setupId });
  }

  /** The user's most recently connected connection (the default of POST /api/ai/assistant/respond). */
  async latestConnection(userId: number): Promise<ConnectionRow | null> {
    return Q.latestConnection.first(this.db, { userId });
  }

  async connectionsOf(userId: number): Promise<ConnectionRow[]> {
    return Q.connectionsOf.rows(this.db, { userId });
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
    await Q.upsertConnection.run(this.db, { ...c, validation: JSON.stringify(c.validation) });
  }

  async setStatus(userId: number, setupId: number, status: ConnectionStatus, validation: Validation): Promise<void> {
    await Q.setStatus.run(this.db, { status, validation: JSON.stringify(validation), userId, setupId });
  }

  async tokenCache(userId: number, setupId: number): Promise<string | null> {
    return (await Q.tokenCache.first(this.db, { userId, setupId }))?.token_cache_enc ?? null;
  }

  /** Stores the cache; creates the connection row (status `invalid` until validated) when there is none yet. */
  async saveTokenCache(userId: number, setupId: number, sealed: string): Promise<void> {
    await Q.saveTokenCache.run(this.db, { userId, setupId, sealed });
  }

  async addPendingSignIn(stateHash: string, p: PendingSignIn, ttlSeconds: number): Promise<void> {
    await Q.purgePending.run(this.db, {});
    await Q.addPending.run(this.db, { ...p, stateHash, ttlSeconds });
  }

  /** Removes and returns the pending sign-in of a state (single use); null when unknown or expired. */
  async takePendingSignIn(stateHash: string): Promise<PendingSignIn | null> {
    const row = await Q.takePending.first(this.db, { stateHash });
    return row && !row.expired ? row : null;
  }

  async userByName(username: string): Promise<{ id: number; username: string } | null> {
    return Q.userByName.first(this.db, { username });
  }

  /** One row of the audit log (audit-log.ts says what goes in it). */
  async audit(row: Parameters<typeof Q.audit.run>[1]): Promise<void> {
    await Q.audit.run(this.db, row);
  }

  /** The audit log's rows, newest first, narrowed by the filters given. */
  async auditRows(filter: { action: string | null; userId: number | null; beforeId: number | null; limit: number }) {
    return Q.auditList.rows(this.db, filter);
  }
}

function toPgArray(values: string[]): string {
  return `{${values.map((v) => `"${v.replace(/["\\]/g, '\\$&')}"`).join(',')}}`;
}
