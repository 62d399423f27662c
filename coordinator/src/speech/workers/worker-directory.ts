import type { Orm } from '../../db/orm.js';
import { AppError } from '../../http/errors.js';
import { WORKER_SECRET_PREFIX, newSecret, sha256Hex } from '../../accounts/secrets.js';
import { SpeechWorker, type WorkerCapabilities } from './entities.js';

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

interface WorkerRow {
  id: number;
  name: string;
  secret_hash: string;
  created_at: Date;
  last_seen_at: Date | null;
  revoked_at: Date | null;
  capabilities: WorkerCapabilities | null;
  contract_version: number | null;
  agent_version: string | null;
  hostname: string | null;
}

export interface WorkerView {
  id: number;
  name: string;
  createdAt: Date;
  lastSeenAt: Date | null;
  revoked: boolean;
  /** Seen within the presence TTL and not revoked. */
  fresh: boolean;
  capabilities: WorkerCapabilities | null;
  contractVersion: number | null;
  agentVersion: string | null;
  hostname: string | null;
}

/**
 * Registered worker agents and their secrets (PostgreSQL only, so the admin CLI needs no Redis).
 * Secrets are shown once and stored as SHA-256.
 */
export class WorkerDirectory {
  constructor(
    private readonly orm: Orm,
    private readonly presenceTtlMs: number,
  ) {}

  async createWorker(name: string): Promise<{ id: number; secret: string }> {
    if (!NAME_RE.test(name)) {
      throw new AppError('validation_failed', 'worker name must be 1-100 letters, digits, dot, dash or underscore', { errors: { name: ['is invalid'] } });
    }
    const em = this.orm.em.fork();
    if (await em.findOne(SpeechWorker, { name })) throw new AppError('conflict', `worker "${name}" already exists`);
    const { secret, hash } = newSecret(WORKER_SECRET_PREFIX);
    const worker = em.create(SpeechWorker, { name, secretHash: hash });
    await em.flush();
    return { id: worker.id, secret };
  }

  /** Issues a new secret (the old one stops working at once) and clears a revocation. */
  async rotateSecret(name: string): Promise<string> {
    const em = this.orm.em.fork();
    const worker = await em.findOne(SpeechWorker, { name });
    if (!worker) throw new AppError('not_found', `no worker named "${name}"`);
    const { secret, hash } = newSecret(WORKER_SECRET_PREFIX);
    worker.secretHash = hash;
    worker.revokedAt = null;
    await em.flush();
    return secret;
  }

  async revokeWorker(name: string): Promise<boolean> {
    const em = this.orm.em.fork();
    const worker = await em.findOne(SpeechWorker, { name });
    if (!worker) return false;
    worker.revokedAt ??= new Date();
    await em.flush();
    return true;
  }

  async listWorkers(): Promise<WorkerView[]> {
    const rows = await this.orm.em.fork().find(SpeechWorker, {}, { orderBy: { name: 'asc' } });
    const freshAfter = Date.now() - this.presenceTtlMs;
    return rows.map((w) => ({
      id: w.id,
      name: w.name,
      createdAt: w.createdAt,
      lastSeenAt: w.lastSeenAt,
      revoked: w.revokedAt !== null,
      fresh: w.revokedAt === null && w.lastSeenAt !== null && w.lastSeenAt.getTime() >= freshAfter,
      capabilities: w.capabilities,
      contractVersion: w.contractVersion,
      agentVersion: w.agentVersion,
      hostname: w.hostname,
    }));
  }

  /**
   * A digest of every worker's secret hash and revocation: it moves whenever a worker is created,
   * revoked, rotated or deleted, from any process (one small query for the whole table).
   */
  async secretsFingerprint(): Promise<string> {
    const rows = await this.orm.em
      .getConnection()
      .execute<Array<{ fp: string }>>(
        `select count(*) || ':' || md5(coalesce(string_agg(id || secret_hash || coalesce(revoked_at::text, ''), ',' order by id), '')) as fp from speech_workers`,
      );
    return rows[0]?.fp ?? '';
  }

  /**
   * The worker a presented secret belongs to; null when unknown or revoked. Read as a plain row,
   * not through the ORM: the registry keeps the authenticated worker for minutes per connected
   * agent, and an ORM entity would keep its forked EntityManager (unit of work, identity map,
   * loaders) alive with it, several kilobytes per worker of an idle fleet.
   */
  async authenticate(secret: string): Promise<SpeechWorker | null> {
    if (!secret.startsWith(WORKER_SECRET_PREFIX)) return null;
    const [row] = await this.orm.em.getConnection().execute<WorkerRow[]>(
      `select id, name, secret_hash, created_at, last_seen_at, revoked_at, capabilities, contract_version, agent_version, hostname
         from speech_workers where secret_hash = ? and revoked_at is null`,
      [sha256Hex(secret)],
    );
    if (!row) return null;
    return Object.assign(new SpeechWorker(), {
      id: row.id,
      name: row.name,
      secretHash: row.secret_hash,
      createdAt: row.created_at,
      lastSeenAt: row.last_seen_at,
      revokedAt: row.revoked_at,
      capabilities: row.capabilities,
      contractVersion: row.contract_version,
      agentVersion: row.agent_version,
      hostname: row.hostname,
    });
  }
}
