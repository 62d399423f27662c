import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import type { SpeechWorker, WorkerCapabilities } from './entities.js';
import { WorkerDirectory } from './worker-directory.js';
import { sha256Hex } from '../../accounts/secrets.js';
import { SetMap } from '../../infra/set-map.js';

export interface WorkerSession {
  sessionId: string;
  workerId: number;
  name: string;
  capabilities: WorkerCapabilities;
  local: boolean;
  /** The contract version the worker said Hello with (absent in sessions stored before it was kept). */
  contractVersion?: number;
}

/**
 * Worker records (through WorkerDirectory) plus presence. Sessions live in Redis with a TTL, so
 * any coordinator can take a worker's heartbeat; `last_seen_at` in PostgreSQL says whether a worker
 * has fresh presence. The local map counts workers talking to this coordinator.
 */
/** How long a known session (and an unknown secret) is trusted without asking Redis or the database again. */
const AUTH_CACHE_MS = 5_000;
/**
 * How long a secret that authenticated is trusted: long, because every change to the workers'
 * secrets (revocation, rotation, deletion, from any process) moves the fingerprint that is checked
 * every AUTH_CACHE_MS and empties the cache. A thousand workers then cost one query per 5 s, not
 * one per RPC.
 */
const AUTH_TRUST_MS = 300_000;
/**
 * Presence (session TTL in Redis, last_seen_at in PostgreSQL) is written at most this often per
 * worker: 5 s, or a quarter of the presence TTL when that is shorter. A fleet of a thousand workers
 * claiming and beating would otherwise write a row a second each.
 */
const PRESENCE_WRITE_MS = 5_000;
/** Presence touched by RPCs is written together, this long after the first touch. */
const PRESENCE_FLUSH_MS = 250;
/** Heartbeats arriving within this long of each other read and renew their sessions in one Redis pipeline. */
const HEARTBEAT_BATCH_MS = 100;

export class WorkerRegistry extends WorkerDirectory {
  private readonly local = new Map<string, { workerId: number; lastSeen: number }>();
  /** The same sessions by worker (touch refreshes a worker's sessions without walking all of them). */
  private readonly localByWorker = new SetMap<number, string>();
  /** secret hash → worker, for AUTH_CACHE_MS: a revoked secret stops working within that time. */
  private readonly authCache = new Map<string, { worker: SpeechWorker | null; at: number }>();
  private readonly sessions = new Map<string, { session: WorkerSession; at: number }>();
  private readonly presenceWritten = new Map<number, number>();
  /** The secrets fingerprint last seen, when it was looked at, and the look under way. */
  private secretsSeen = '';
  private secretsCheckedAt = 0;
  private secretsCheck: Promise<void> | null = null;
  /** Presence touched since the last flush (session keys to extend, workers whose last_seen_at moves). */
  private readonly pendingSessions = new Set<string>();
  private readonly pendingSeen = new Set<number>();
  private presenceFlush: NodeJS.Timeout | null = null;
  /** Heartbeats waiting for their session's GETEX (sent together, see renewSession). */
  private readonly pendingBeats: Array<{ key: string; resolve: (raw: string | null) => void; reject: (err: unknown) => void }> = [];

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
      contractVersion: info.contractVersion,
    };
    await this.redis.set(this.sessionKey(session.sessionId), JSON.stringify(session), 'PX', this.config.WORKER_PRESENCE_TTL_MS);
    await this.db.em
      .getConnection()
      .execute('update speech_workers set last_seen_at = now(), capabilities = ?::jsonb, contract_version = ?, agent_version = ?, hostname = ? where id = ?', [
        JSON.stringify({ ...info.capabilities, local: info.local }),
        info.contractVersion,
        info.agentVersion.slice(0, 50),
        info.hostname.slice(0, 255),
        worker.id,
      ]);
    this.setLocal(session.sessionId, worker.id);
    this.sessions.set(session.sessionId, { session, at: Date.now() });
    this.presenceWritten.set(worker.id, Date.now());
    return session;
  }

  /** The worker a secret belongs to (not revoked), cached briefly: every RPC authenticates. */
  override async authenticate(secret: string): Promise<SpeechWorker | null> {
    await this.checkSecrets();
    const key = sha256Hex(secret);
    const hit = this.authCache.get(key);
    if (hit && Date.now() - hit.at < (hit.worker ? AUTH_TRUST_MS : AUTH_CACHE_MS)) return hit.worker;
    const worker = await super.authenticate(secret);
    if (this.authCache.size > 10_000) this.authCache.clear();
    this.authCache.set(key, { worker, at: Date.now() });
    return worker;
  }

  /** Empties the secret cache when the workers' secrets changed anywhere (looked at most every AUTH_CACHE_MS, one look at a time). */
  private checkSecrets(): Promise<void> {
    if (Date.now() - this.secretsCheckedAt < AUTH_CACHE_MS) return this.secretsCheck ?? Promise.resolve();
    this.secretsCheckedAt = Date.now();
    this.secretsCheck = this.secretsFingerprint()
      .then((fp) => {
        if (fp !== this.secretsSeen) this.authCache.clear();
        this.secretsSeen = fp;
      })
      .catch(() => {
        // The database is away: trust nothing cached for longer than AUTH_CACHE_MS.
        this.secretsSeen = '';
        for (const [k, v] of this.authCache) if (Date.now() - v.at >= AUTH_CACHE_MS) this.authCache.delete(k);
      })
      .finally(() => (this.secretsCheck = null));
    return this.secretsCheck;
  }

  /** Revocation and rotation through this coordinator apply at once (another process's within AUTH_CACHE_MS). */
  override async revokeWorker(name: string): Promise<boolean> {
    const revoked = await super.revokeWorker(name);
    this.authCache.clear();
    return revoked;
  }

  override async rotateSecret(name: string): Promise<string> {
    const secret = await super.rotateSecret(name);
    this.authCache.clear();
    return secret;
  }

  /**
   * The session a worker opened with Hello, if it is still alive and belongs to that worker. Asking
   * for it is activity: the worker's presence is refreshed (see touch).
   */
  async session(worker: SpeechWorker, sessionId: string): Promise<WorkerSession | null> {
    const hit = this.sessions.get(sessionId);
    let session: WorkerSession | null;
    if (hit && Date.now() - hit.at < AUTH_CACHE_MS) session = hit.session;
    else {
      const raw = await this.redis.get(this.sessionKey(sessionId));
      session = raw ? (JSON.parse(raw) as WorkerSession) : null;
      if (session) this.sessions.set(sessionId, { session, at: Date.now() });
      else this.sessions.delete(sessionId);
    }
    if (!session || session.workerId !== worker.id) return null;
    this.touch(worker.id);
    return session;
  }

  /**
   * Any authenticated RPC (Claim, progress, Complete, Heartbeat) is presence: the worker's sessions
   * on this coordinator and last_seen_at are refreshed, at most once per PRESENCE_WRITE_MS, so a
   * worker busy claiming never loses its session.
   */
  touch(workerId: number) {
    const now = Date.now();
    if (now - (this.presenceWritten.get(workerId) ?? 0) < Math.min(PRESENCE_WRITE_MS, this.config.WORKER_PRESENCE_TTL_MS / 4)) return;
    this.presenceWritten.set(workerId, now);
    for (const id of this.localByWorker.get(workerId)) {
      this.local.get(id)!.lastSeen = now;
      this.pendingSessions.add(this.sessionKey(id));
    }
    this.pendingSeen.add(workerId);
    this.schedulePresenceFlush();
  }

  private setLocal(sessionId: string, workerId: number) {
    const previous = this.local.get(sessionId);
    if (previous && previous.workerId !== workerId) this.deleteLocal(sessionId);
    this.local.set(sessionId, { workerId, lastSeen: Date.now() });
    this.localByWorker.add(workerId, sessionId);
  }

  private deleteLocal(sessionId: string) {
    const s = this.local.get(sessionId);
    if (!s) return;
    this.local.delete(sessionId);
    this.localByWorker.delete(s.workerId, sessionId);
  }

  private schedulePresenceFlush() {
    if (this.presenceFlush) return;
    this.presenceFlush = setTimeout(() => void this.flushPresence(), PRESENCE_FLUSH_MS);
    this.presenceFlush.unref();
  }

  /** Writes the presence gathered by touch: one Redis pipeline and one UPDATE for all workers. */
  private async flushPresence() {
    this.presenceFlush = null;
    const keys = [...this.pendingSessions];
    const ids = [...this.pendingSeen];
    this.pendingSessions.clear();
    this.pendingSeen.clear();
    if (keys.length) {
      const pipeline = this.redis.pipeline();
      for (const key of keys) pipeline.pexpire(key, this.config.WORKER_PRESENCE_TTL_MS);
      await pipeline.exec().catch(() => undefined);
    }
    if (ids.length) {
      await this.db.em
        .getConnection()
        .execute('update speech_workers set last_seen_at = now() where id in (?)', [ids])
        .catch(() => undefined);
    }
  }

  /** Writes pending presence now (shutdown). */
  async close() {
    if (this.presenceFlush) clearTimeout(this.presenceFlush);
    await this.flushPresence();
  }

  /**
   * Heartbeats arriving within HEARTBEAT_BATCH_MS of each other read their sessions and renew
   * their expiry (GETEX, Redis 6.2+) in one pipeline, one socket write: a write per heartbeat was a
   * quarter of an idle fleet's coordinator CPU (1,000 workers beat 67 times a second). Not per
   * event-loop turn: an ioredis pipeline on the shared connection copies every Lua command BullMQ
   * defined on it, kilobytes of garbage per pipeline.
   */
  private renewSession(key: string): Promise<string | null> {
    const batch = this.pendingBeats;
    return new Promise((resolve, reject) => {
      batch.push({ key, resolve, reject });
      if (batch.length > 1) return;
      setTimeout(() => {
        const beats = batch.splice(0);
        const pipeline = this.redis.pipeline();
        for (const b of beats) pipeline.getex(b.key, 'PX', this.config.WORKER_PRESENCE_TTL_MS);
        pipeline.exec().then(
          (results) =>
            beats.forEach((b, i) => {
              const [err, raw] = results?.[i] ?? [new Error('no reply from Redis')];
              if (err) b.reject(err);
              else b.resolve(raw as string | null);
            }),
          (err: unknown) => beats.forEach((b) => b.reject(err)),
        );
      }, HEARTBEAT_BATCH_MS);
    });
  }

  /** Refreshes presence; false when the session is unknown, expired or belongs to another worker. */
  async heartbeat(worker: SpeechWorker, sessionId: string): Promise<boolean> {
    const raw = await this.renewSession(this.sessionKey(sessionId));
    const session = raw ? (JSON.parse(raw) as WorkerSession) : null;
    if (!session || session.workerId !== worker.id) {
      this.deleteLocal(sessionId);
      this.sessions.delete(sessionId);
      return false;
    }
    this.setLocal(sessionId, worker.id);
    // last_seen_at goes with the next presence flush (one UPDATE for every worker beating meanwhile).
    this.presenceWritten.set(worker.id, Date.now());
    this.pendingSeen.add(worker.id);
    this.schedulePresenceFlush();
    return true;
  }

  /** Distinct workers with a fresh session on this coordinator (the `speech_workers_connected` gauge). */
  connectedCount(): number {
    const cutoff = Date.now() - this.config.WORKER_PRESENCE_TTL_MS;
    const workers = new Set<number>();
    for (const [id, s] of this.local) {
      if (s.lastSeen < cutoff) this.deleteLocal(id);
      else workers.add(s.workerId);
    }
    return workers.size;
  }
}
