import type { Orm } from '../db/orm.js';
import { AssistantRepository } from './repository.js';

/** What the audit log records: OAuth operations and assistant requests. */
export type AuditAction = 'setup_save' | 'delegate' | 'connect_start' | 'connect' | 'refresh' | 'validation' | 'request' | 'prompt_test';

export interface AuditEntry {
  action: AuditAction;
  /** `ok`, or what went wrong (`refused`, `failed`, `reconnect_required`, `licence_missing`, `upstream_error`…). */
  result: string;
  userId?: number | null | undefined;
  username?: string | null | undefined;
  setupSlug?: string | null | undefined;
  tenantId?: string | null | undefined;
  /** MSAL/identity-provider correlation id or the upstream request id: a diagnostic identifier, never a secret. */
  correlationId?: string | null | undefined;
  /** This service's request id (`x-request-id`). */
  requestId?: string | null | undefined;
  /** Identity-provider (`AADSTS…`), MSAL or connector error code. */
  errorCode?: string | null | undefined;
  detail?: string | null | undefined;
}

export interface AuditRow {
  id: number;
  at: string;
  action: string;
  result: string;
  user_id: number | null;
  username: string | null;
  setup_slug: string | null;
  tenant_id: string | null;
  correlation_id: string | null;
  request_id: string | null;
  error_code: string | null;
  detail: string | null;
}

/** Strings that look like a credential are cut out of free text before it is stored. */
const CREDENTIALISH =
  /(eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*\.?[A-Za-z0-9_-]*|sonar_[a-z]+_[A-Za-z0-9_-]+|(?:code|state|token|secret|assertion|verifier)=[^&\s]+)/g;

export function scrubDetail(text: string): string {
  return text.replace(CREDENTIALISH, '[redacted]').slice(0, 500);
}

/**
 * The assistant audit log: its own table (`assistant_audit`), separate from the application log.
 * Rows carry the action, result and diagnostic identifiers — never OAuth state, authorization
 * codes, access or refresh tokens, or client secrets.
 */
export class AssistantAuditLog {
  private readonly repo: AssistantRepository;

  constructor(orm: Orm) {
    this.repo = new AssistantRepository(orm);
  }

  async record(e: AuditEntry): Promise<void> {
    await this.repo.audit({
      action: e.action,
      result: e.result.slice(0, 32),
      userId: e.userId ?? null,
      username: e.username ?? null,
      setupSlug: e.setupSlug ?? null,
      tenantId: e.tenantId ?? null,
      correlationId: e.correlationId?.slice(0, 64) ?? null,
      requestId: e.requestId?.slice(0, 64) ?? null,
      errorCode: e.errorCode?.slice(0, 100) ?? null,
      detail: e.detail ? scrubDetail(e.detail) : null,
    });
  }

  async list(filter: { limit: number; action?: string | undefined; userId?: number | undefined; beforeId?: number | undefined }): Promise<AuditRow[]> {
    const rows = await this.repo.auditRows({
      action: filter.action || null,
      userId: filter.userId ?? null,
      beforeId: filter.beforeId ?? null,
      limit: filter.limit,
    });
    return rows.map((r) => ({ ...r, id: Number(r.id), at: new Date(r.at).toISOString() }));
  }
}
