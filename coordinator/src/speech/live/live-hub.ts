import { createHash } from 'node:crypto';
import { createAdapter } from '@socket.io/redis-adapter';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { ClientToServerEvents, LiveSubscribeReply, ServerToClientEvents } from '@sonar/shared/live-events';
import { Server, type Socket } from 'socket.io';
import type { AuthUser } from '../../accounts/types.js';
import { safePublish, watchRedis } from '../../infra/redis-watch.js';
import type { JobChange, JobEventSink, LiveAi, LiveDiarization, LiveSegment, LiveStatus } from '../jobs/job-events.js';
import type { JobService } from '../jobs/job-service.js';
import { presentSegment } from '../jobs/presenter.js';

export const jobRoom = (jobId: number) => `speech:job:${jobId}`;

/** Per-socket data: the authenticated user, set by the handshake middleware before `connection`. */
interface LiveSocketData {
  user?: AuthUser;
  /** The user's token version at the handshake: a later disable or password change moves it. */
  tokenVersion?: number;
  /** The room of the signed-in session it came with (a cookie): its sign-out ends the socket. */
  sessionRoom?: string;
}

/** A session's room: a hash of its id (the id itself is a bearer secret and never reaches Redis). */
const sessionRoom = (sessionId: string) => `session:${createHash('sha256').update(sessionId).digest('hex')}`;
/** The wire contract (shared/src/live-events.ts); no events between coordinators (the Redis adapter only fans out). */
type LiveServer = Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, LiveSocketData>;
type LiveSocket = Socket<ClientToServerEvents, ServerToClientEvents, Record<string, never>, LiveSocketData>;

/**
 * Live job progress for browsers over socket.io. A client emits `subscribe` with a job id; it is
 * authorized exactly like GET /api/speech/jobs/{id} (session cookie or JWT in the handshake),
 * joins the job's room, then receives a `snapshot` (status plus every segment so far) followed by
 * live `segment`, `status`, `diarization` (when speaker labelling starts or ends; at the end with the
 * segments' speakers and the whole labelled pass, split at speaker changes and renumbered, which
 * replaces the segments shown), `analysis` (an analysis, translation or automatic title changed
 * state) and `changed` events (anything else the job page shows: a runtime-log entry, a share, a
 * cancellation request, the target, speaker names, title or note). The job page answers every
 * event but `segment` by fetching its cards again (GET /speech/jobs/{id}/cards). Segments carry `seq`, so a client applies each one once and
 * in order even where a live event overlaps the snapshot. The Redis adapter fans events out to
 * clients connected to any coordinator.
 */
export class LiveHub implements JobEventSink {
  private io: LiveServer | null = null;
  private pub: Redis | null = null;
  private sub: Redis | null = null;

  constructor(
    private readonly redis: Redis,
    private readonly keyPrefix: string,
  ) {}

  attach(
    app: FastifyInstance,
    deps: {
      jobs: () => JobService;
      authenticate: (
        headers: Record<string, string | string[] | undefined>,
        auth: Record<string, unknown>,
      ) => Promise<{ user: AuthUser; tokenVersion: number; sessionId?: string } | null>;
      /** Whether a handshake request (polling or WebSocket upgrade) may proceed, from its headers (the Origin check). */
      allowHandshake?: (headers: Record<string, string | string[] | undefined>) => boolean;
    },
  ) {
    // The adapter publishes without handling failures: during a Redis outage a rejected publish
    // would be an unhandled rejection, so publish never rejects (logged at warn instead).
    // Auto-pipelining: the publishes of one event-loop turn (many jobs' events) go out in one write.
    this.pub = safePublish(watchRedis(this.redis.duplicate({ enableAutoPipelining: true }), app.log, 'live-pub'), app.log, 'live event');
    this.sub = watchRedis(this.redis.duplicate(), app.log, 'live-sub');
    const io: LiveServer = new Server(app.server, {
      path: '/socket.io',
      serveClient: true,
      adapter: createAdapter(this.pub, this.sub, { key: `${this.keyPrefix}socket.io` }),
      cors: { origin: false },
      // Cross-site WebSocket hijacking: a foreign page's handshake would carry the victim's session
      // cookie. Refused before authentication (HTTP 403 for polling, a closed upgrade for WebSocket).
      allowRequest: (req, callback) => {
        const allowed = deps.allowHandshake ? deps.allowHandshake(req.headers) : true;
        callback(allowed ? null : 'Origin not allowed', allowed);
      },
    });
    this.io = io;

    io.use((socket, next) => {
      deps.authenticate(socket.handshake.headers, socket.handshake.auth ?? {}).then((found) => {
        if (!found) {
          next(Object.assign(new Error('unauthenticated'), { data: { reason: 'unauthenticated' } }));
          return;
        }
        socket.data.user = found.user;
        socket.data.tokenVersion = found.tokenVersion;
        if (found.sessionId) socket.data.sessionRoom = sessionRoom(found.sessionId);
        next();
      }, next);
    });

    io.on('connection', (socket: LiveSocket) => {
      if (socket.data.sessionRoom) void socket.join(socket.data.sessionRoom);
      // Payloads are typed by the contract but come from any client: they are checked here as well.
      socket.on('subscribe', async (payload: unknown, ack?: (reply: LiveSubscribeReply) => void) => {
        const jobId = Number((payload as { jobId?: unknown })?.jobId);
        const reply = typeof ack === 'function' ? ack : () => undefined;
        if (!Number.isInteger(jobId) || jobId <= 0) {
          reply({ ok: false, reason: 'validation_failed' });
          return;
        }
        try {
          const jobs = deps.jobs();
          const job = await jobs.getVisible(socket.data.user!, jobId);
          await socket.join(jobRoom(jobId));
          const segments = await jobs.segments(jobId, job.currentPass);
          socket.emit('snapshot', {
            job_id: jobId,
            pass: job.currentPass,
            status: job.status,
            stage_label: job.stageLabel,
            audio_position_seconds: job.audioPositionSeconds,
            segments: segments.map(presentSegment),
          });
          reply({ ok: true });
        } catch {
          reply({ ok: false, reason: 'not_found' });
        }
      });
      socket.on('unsubscribe', (payload: unknown) => {
        const jobId = Number((payload as { jobId?: unknown })?.jobId);
        if (Number.isInteger(jobId)) void socket.leave(jobRoom(jobId));
      });
    });

    app.addHook('onClose', async () => {
      // Late events (status publishes finishing after shutdown began) must not reach closed clients.
      this.io = null;
      await new Promise<void>((resolve) => void io.close(() => resolve()));
      await this.pub?.quit().catch(() => undefined);
      await this.sub?.quit().catch(() => undefined);
    });
  }

  /**
   * Disconnects this coordinator's sockets that `allowed` no longer accepts (their user disabled,
   * password changed, permission revoked); each coordinator checks its own sockets. Answers how
   * many were disconnected.
   */
  async dropRevoked(allowed: (holders: Array<{ user: AuthUser; tokenVersion: number }>) => Promise<boolean[]>): Promise<number> {
    const io = this.io;
    if (!io) return 0;
    const sockets = (await io.local.fetchSockets()).filter((s) => s.data.user && s.data.tokenVersion !== undefined);
    if (!sockets.length) return 0;
    const verdicts = await allowed(sockets.map((s) => ({ user: s.data.user!, tokenVersion: s.data.tokenVersion! })));
    let dropped = 0;
    sockets.forEach((s, i) => {
      if (verdicts[i]) return;
      s.disconnect(true);
      dropped += 1;
    });
    return dropped;
  }

  /** A session signed out: its sockets are disconnected on every coordinator (through the Redis adapter). */
  endSession(sessionId: string) {
    this.io?.in(sessionRoom(sessionId)).disconnectSockets(true);
  }

  segment(jobId: number, pass: number, segment: LiveSegment) {
    this.io?.to(jobRoom(jobId)).emit('segment', { job_id: jobId, pass, ...segment });
  }

  status(jobId: number, status: LiveStatus) {
    this.io?.to(jobRoom(jobId)).emit('status', { job_id: jobId, ...status });
  }

  diarization(jobId: number, update: LiveDiarization) {
    this.io?.to(jobRoom(jobId)).emit('diarization', { job_id: jobId, ...update });
  }

  ai(jobId: number, update: LiveAi) {
    this.io?.to(jobRoom(jobId)).emit('analysis', { job_id: jobId, ...update });
  }

  changed(jobId: number, what: JobChange) {
    this.io?.to(jobRoom(jobId)).emit('changed', { job_id: jobId, what });
  }
}
