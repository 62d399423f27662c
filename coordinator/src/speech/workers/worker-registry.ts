import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import { AppError } from '../../http/errors.js';
import { WORKER_SECRET_PREFIX, newSecret, sha256Hex } from '../../accounts/secrets.js';
import { SpeechWorker, type WorkerCapabilities } from './entities.js';

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export interface WorkerSession {
  sessionId: string;
  workerId: number;
  name: string;
  capabilities: WorkerCapabilities;
  local: boolean;
}

export interface WorkerView {
  id: number;
  name: string;
  createdAt: Date;
  lastSeenAt: Date | null;
  revoked: boolean;
  fresh: boolean;
  capabilities: WorkerCapabilities | null;
  contractVersion: number | null;
  agentVersion: string | null;
  hostname: string | null;
}

/**
 * Registered worker agents, their secrets and their presence. Sessions live in Redis with a TTL
 * (so any coordinator can take a worker's heartbeat); `last_seen_at` in PostgreSQL says whether a
 * worker has fresh presence. The local map counts workers talking to this coordinator.
 */
export class WorkerRegistry {
  private readonly local = new Map<string, { workerId: number; lastSeen: number }>();

  constructor(
    private readonly orm: Orm,
    private readonly redis: Redis,
    private readonly config: Pick<Config, 'REDIS_KEY_PREFIX' | 'WORKER_PRESENCE_TTL_MS' | 'WORKER_HEARTBEAT_INTERVAL_MS'>,
  ) {}

  private sessionKey(id: string) {
    return `${this.config.REDIS_KEY_PREFIX}worker-session:${id}`;
  }

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
    const freshAfter = Date.now() - this.config.WORKER_PRESENCE_TTL_MS;
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

  /** The worker a presented secret belongs to; null when unknown or revoked. */
  async authenticate(secret: string): Promise<SpeechWorker | null> {
    if (!secret.startsWith(WORKER_SECRET_PREFIX)) return null;
    const worker = await this.orm.em.fork().findOne(SpeechWorker, { secretHash: sha256Hex(secret) });
    return worker && !worker.revokedAt ? worker : null;
  }

  async hello(
    worker: SpeechWorker,
    info: { contractVersion: number; agentVersion: string; hostname: string; capabilities: WorkerCapabilities; local: boolean },
  ): Promise<WorkerSession> {
    const session: WorkerSession = {
      sessionId: randomUUID(),
      workerId: worker.id,
      name: worker.name,
      capabilities: info.capabilities,
      local: info.local,
    };
    await this.redis.set(this.sessionKey(session.sessionId), JSON.stringify(session), 'PX', this.config.WORKER_PRESENCE_TTL_MS);
    await this.orm.em
      .getConnection()
      .execute(
        'update speech_workers set last_seen_at = now(), capabilities = ?::jsonb, contract_version = ?, agent_version = ?, hostname = ? where id = ?',
        [JSON.stringify(info.capabilities), info.contractVersion, info.agentVersion.slice(0, 50), info.hostname.slice(0, 255), worker.id],
      );
    this.local.set(session.sessionId, { workerId: worker.id, lastSeen: Date.now() });
    return session;
  }

  /** Refreshes presence; false when the session is unknown, expired or belongs to another worker. */
  async heartbeat(worker: SpeechWorker, sessionId: string): Promise<boolean> {
    const key = this.sessionKey(sessionId);
    const raw = await this.redis.get(key);
    const session = raw ? (JSON.parse(raw) as WorkerSession) : null;
    if (!session || session.workerId !== worker.id) {
      this.local.delete(sessionId);
      return false;
    }
    await this.redis.pexpire(key, this.config.WORKER_PRESENCE_TTL_MS);
    await this.orm.em.getConnection().execute('update speech_workers set last_seen_at = now() where id = ?', [worker.id]);
    this.local.set(sessionId, { workerId: worker.id, lastSeen: Date.now() });
    return true;
  }

  /** Distinct workers with a fresh session on this coordinator (the `speech_workers_connected` gauge). */
  connectedCount(): number {
    const cutoff = Date.now() - this.config.WORKER_PRESENCE_TTL_MS;
    const workers = new Set<number>();
    for (const [id, s] of this.local) {
      if (s.lastSeen < cutoff) this.local.delete(id);
      else workers.add(s.workerId);
    }
    return workers.size;
  }
}
