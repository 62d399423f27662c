import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import type { SpeechWorker, WorkerCapabilities } from './entities.js';
import { WorkerDirectory } from './worker-directory.js';

export interface WorkerSession {
  sessionId: string;
  workerId: number;
  name: string;
  capabilities: WorkerCapabilities;
  local: boolean;
}

/**
 * Worker records (through WorkerDirectory) plus presence. Sessions live in Redis with a TTL, so
 * any coordinator can take a worker's heartbeat; `last_seen_at` in PostgreSQL says whether a worker
 * has fresh presence. The local map counts workers talking to this coordinator.
 */
export class WorkerRegistry extends WorkerDirectory {
  private readonly local = new Map<string, { workerId: number; lastSeen: number }>();

  constructor(
    private readonly db: Orm,
    private readonly redis: Redis,
    private readonly config: Pick<Config, 'REDIS_KEY_PREFIX' | 'WORKER_PRESENCE_TTL_MS'>,
  ) {
    super(db, config.WORKER_PRESENCE_TTL_MS);
  }

  private sessionKey(id: string) {
    return `${this.config.REDIS_KEY_PREFIX}worker-session:${id}`;
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
    await this.db.em
      .getConnection()
      .execute(
        'update speech_workers set last_seen_at = now(), capabilities = ?::jsonb, contract_version = ?, agent_version = ?, hostname = ? where id = ?',
        [JSON.stringify({ ...info.capabilities, local: info.local }), info.contractVersion, info.agentVersion.slice(0, 50), info.hostname.slice(0, 255), worker.id],
      );
    this.local.set(session.sessionId, { workerId: worker.id, lastSeen: Date.now() });
    return session;
  }

  /** The session a worker opened with Hello, if it is still alive and belongs to that worker. */
  async session(worker: SpeechWorker, sessionId: string): Promise<WorkerSession | null> {
    const raw = await this.redis.get(this.sessionKey(sessionId));
    const session = raw ? (JSON.parse(raw) as WorkerSession) : null;
    return session && session.workerId === worker.id ? session : null;
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
    await this.db.em.getConnection().execute('update speech_workers set last_seen_at = now() where id = ?', [worker.id]);
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
