import { cleanFilename, jobSettings } from '../submission.js';
import type { IncomingMessage } from 'node:http';
import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { FileStore } from '@tus/file-store';
import { Server, type ServerOptions, type Upload } from '@tus/server';
import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';
import type { AuthUser } from '../../accounts/types.js';
import type { Config } from '../../config.js';
import { AppError, DEFAULT_STATUS, zodFieldErrors } from '../../http/errors.js';
import { uploadLimits } from '../host-limits.js';
import type { JobService } from '../jobs/job-service.js';
import type { MediaStore } from '../jobs/media-store.js';
import type { ModelCatalog } from '../jobs/model-catalog.js';
import { createJobFieldsSchema, type CreateJobFields } from '../schemas.js';

/** Where the tus endpoint is mounted (creation URL; uploads live at `${TUS_PATH}/{id}`). */
export const TUS_PATH = '/api/speech/uploads';
/** Response header (and HEAD header of a finished upload) with the job the upload created. */
export const JOB_ID_HEADER = 'X-Sonar-Job-Id';
/** Server-side metadata entry with the creator's user id; whatever a client sends under this name is replaced. */
const OWNER_KEY = 'sonar_owner_id';
/** How long a finished upload remembers its job (for `GET /api/speech/uploads/{id}/job` and a resuming HEAD). */
const FINISHED_TTL_SECONDS = 7 * 86400;
/** Metadata entries that carry job settings, as in a multipart submission. */
const SETTING_KEYS = [
  'source_label',
  'source_note',
  'model',
  'language',
  'analysis_language',
  'translation_target_languages',
  'disable_diarization',
  'num_speakers',
  'min_speakers',
  'max_speakers',
] as const;

export interface FinishedUpload {
  jobId: number;
  ownerId: number;
  sizeBytes: number;
}

/** The request object @tus/server hands to its hooks (srvx's ServerRequest on Node.js). */
type TusRequest = Parameters<NonNullable<ServerOptions['onUploadCreate']>>[0];

interface RequestContext {
  user: AuthUser;
  log: FastifyBaseLogger;
}

/** An error the tus server answers with (status and body; JSON in the speech API's error shape). */
function tusError(status: number, body: unknown) {
  return { status_code: status, body: typeof body === 'string' ? body : JSON.stringify(body) };
}

function validation(errors: Record<string, string[]>) {
  const [field, messages] = Object.entries(errors)[0] ?? ['request', ['is invalid']];
  return tusError(422, { ok: false, reason: 'validation_failed', message: `${field}: ${messages[0]}`, errors });
}

/**
 * Resumable uploads (tus 1.0, @tus/server with a FileStore under SPEECH_MEDIA_DIR/tus). The upload
 * metadata carries the settings of a multipart job (filename, source_label, source_note, model,
 * language, analysis_language, translation_target_languages, disable_diarization, num_speakers,
 * min_speakers, max_speakers), validated when
 * the upload is created; the creator's user id is added server-side. A finished upload becomes a
 * job exactly like a multipart one: JobService.create with the finished file as the temporary file,
 * which is moved into the job's folder (no copy). The job id is answered in `X-Sonar-Job-Id` and kept
 * in Redis for a week, so a client that lost the final response can ask for it (and a resuming HEAD
 * sees the upload complete instead of sending it again).
 *
 * The tus lock is in-process (MemoryLocker): run one coordinator per SPEECH_MEDIA_DIR, or route an
 * upload's requests to one coordinator.
 */
export class TusUploads {
  readonly directory: string;
  readonly store: FileStore;
  readonly server: Server;
  private readonly contexts = new WeakMap<IncomingMessage, RequestContext>();

  constructor(
    private readonly config: Config,
    private readonly redis: Redis,
    private readonly jobs: JobService,
    private readonly media: MediaStore,
    private readonly catalog: ModelCatalog,
  ) {
    this.directory = path.join(media.root, 'tus');
    // The tus expiration extension: Upload-Expires on creation, 410 for an expired upload, and
    // the age past which cleanupExpired (server.cleanUpExpiredUploads) removes it.
    this.store = new FileStore({ directory: this.directory, expirationPeriodInMilliseconds: config.SPEECH_UPLOAD_EXPIRY_HOURS * 3600_000 });
    const publicOrigin = new URL(config.PUBLIC_BASE_URL).origin;
    this.server = new Server({
      path: TUS_PATH,
      datastore: this.store,
      relativeLocation: true,
      maxSize: uploadLimits(config).effectiveBytes,
      exposedHeaders: [JOB_ID_HEADER],
      allowedHeaders: ['X-CSRF-Token'],
      // Same-origin pages only: no Access-Control-Allow-Origin for other origins.
      allowedOrigins: (origin) => origin === publicOrigin,
      onUploadCreate: (req, upload) => this.onCreate(req, upload),
      onUploadFinish: (req, upload) => this.onFinish(req, upload),
    });
  }

  /** The signed-in caller of a tus request; the Fastify route binds it before handing the raw request over. */
  bind(raw: IncomingMessage, context: RequestContext) {
    this.contexts.set(raw, context);
  }

  private contextOf(req: TusRequest): RequestContext {
    const raw = (req as { runtime?: { node?: { req?: IncomingMessage } } }).runtime?.node?.req;
    const context = raw ? this.contexts.get(raw) : undefined;
    if (!context) throw tusError(401, { ok: false, reason: 'unauthenticated', message: 'Authentication required.' });
    return context;
  }

  /** Who created an unfinished upload: `exists` false when there is no such upload. */
  async ownerOf(id: string): Promise<{ exists: boolean; ownerId: number | null }> {
    let info: Upload | undefined;
    try {
      info = await this.store.configstore.get(id);
    } catch {
      return { exists: false, ownerId: null };
    }
    if (!info) return { exists: false, ownerId: null };
    const owner = Number(info.metadata?.[OWNER_KEY]);
    return { exists: true, ownerId: Number.isInteger(owner) && owner > 0 ? owner : null };
  }

  /** Offset and length of an unfinished upload (null when there is none). */
  async progress(id: string): Promise<{ offset: number; size: number | null } | null> {
    try {
      const upload = await this.store.getUpload(id);
      return { offset: upload.offset, size: upload.size ?? null };
    } catch {
      return null;
    }
  }

  async finished(id: string): Promise<FinishedUpload | null> {
    const raw = await this.redis.get(this.finishedKey(id));
    if (!raw) return null;
    try {
      return JSON.parse(raw) as FinishedUpload;
    } catch {
      return null;
    }
  }

  private finishedKey(id: string) {
    return `${this.config.REDIS_KEY_PREFIX}speech:upload:${id}`;
  }

  /** The metadata's job settings, validated like a multipart submission's form fields. */
  private settings(metadata: Upload['metadata']): CreateJobFields {
    const raw: Record<string, string> = {};
    for (const key of SETTING_KEYS) {
      const value = metadata?.[key];
      if (typeof value === 'string') raw[key] = value;
    }
    const parsed = createJobFieldsSchema.safeParse(raw);
    if (!parsed.success) {
      throw validation(zodFieldErrors(parsed.error, 'metadata'));
    }
    return parsed.data;
  }

  /** Creation: a known length within the limit, valid settings and a known model; the owner is recorded. */
  private async onCreate(req: TusRequest, upload: Upload): Promise<{ metadata: Upload['metadata'] }> {
    const { user } = this.contextOf(req);
    if (upload.size === undefined) {
      throw tusError(400, { ok: false, reason: 'validation_failed', message: 'Upload-Length is required (deferred lengths are not accepted).' });
    }
    if (upload.size === 0) throw validation({ media_file: ['the file is empty'] });
    const fields = this.settings(upload.metadata);
    const model = fields.model ?? this.config.SPEECH_DEFAULT_MODEL;
    // Refused before any byte is sent, like the submission itself would (JobService.create).
    const refusal = (await this.catalog.snapshot()).refusal(model, fields.language);
    if (refusal) throw validation({ [refusal.field]: [refusal.message] });
    const metadata: Record<string, string | null> = {};
    for (const [k, v] of Object.entries(upload.metadata ?? {})) if (k !== OWNER_KEY) metadata[k] = v;
    metadata[OWNER_KEY] = String(user.id);
    return { metadata };
  }

  /** The last byte arrived: queue the job from the finished file (moved, not copied). */
  private async onFinish(req: TusRequest, upload: Upload): Promise<{ headers: Record<string, string> }> {
    const { user, log } = this.contextOf(req);
    if (upload.metadata?.[OWNER_KEY] !== String(user.id)) throw tusError(404, { ok: false, reason: 'not_found', message: 'Upload not found.' });
    const file = upload.storage?.path ?? path.join(this.directory, upload.id);
    try {
      const fields = this.settings(upload.metadata);
      const filename = cleanFilename(upload.metadata?.filename ?? upload.metadata?.name) || 'upload';
      const { sizeBytes, sha256 } = await this.media.hashFile(file);
      const job = await this.jobs.create(user, {
        channel: 'web',
        source: { type: 'upload', tempPath: file, filename, sizeBytes, sha256 },
        ...jobSettings(fields),
      });
      const done: FinishedUpload = { jobId: job.id, ownerId: user.id, sizeBytes };
      await this.redis.set(this.finishedKey(upload.id), JSON.stringify(done), 'EX', FINISHED_TTL_SECONDS);
      log.info({ jobId: job.id, upload: upload.id, sizeBytes }, 'speech job queued from a resumable upload');
      return { headers: { [JOB_ID_HEADER]: String(job.id) } };
    } catch (err) {
      // JobService discards the file on its own validation failures; anything else must not leave it either.
      await rm(file, { force: true });
      if (err && typeof err === 'object' && 'status_code' in err) throw err;
      if (err instanceof AppError) {
        const errors = err.details.errors;
        throw tusError(DEFAULT_STATUS[err.reason], { ok: false, reason: err.reason, message: err.message, ...(errors ? { errors } : {}) });
      }
      log.error({ err, upload: upload.id }, 'a finished resumable upload could not be queued');
      throw tusError(500, { ok: false, reason: 'internal_error', message: 'The upload could not be queued.' });
    } finally {
      await this.store.configstore.delete(upload.id).catch(() => undefined);
    }
  }

  /**
   * The `speech-upload-expiry` maintenance task: removes what the tus folder holds past
   * SPEECH_UPLOAD_EXPIRY_HOURS. Returns how many uploads (or stray files) were removed.
   *
   * @tus/server's `cleanUpExpiredUploads` (FileStore.deleteExpired) does the ordinary case: an
   * upload with a data file and a readable info file whose `creation_date` is older than the
   * store's `expirationPeriodInMilliseconds`, judged by the real clock (`new Date()`), the same
   * judgment its HEAD and PATCH handlers use to answer 410 for an expired upload.
   */
  async cleanupExpired(): Promise<number> {
    let removed: number;
    try {
      removed = await this.server.cleanUpExpiredUploads();
    } catch (err) {
      // FileConfigstore.list reads the folder; none yet means nothing to expire.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    return removed + (await this.sweepLeftovers());
  }

  /**
   * What FileStore.deleteExpired leaves behind, removed once past the same expiry and clock:
   * - ids that are not a data file + info file pair (FileConfigstore.list only lists pairs): a data
   *   file whose info file is gone, or an info file whose data file is gone;
   * - info files FileConfigstore.get cannot read (it answers undefined for a broken JSON file), or
   *   without a `creation_date`: their age is the file's mtime;
   * - uploads whose stored size equals their stored offset, which deleteExpired skips as finished.
   *   A finished upload is queued and its info file deleted in onFinish, so one still here past the
   *   expiry never became a job (the process stopped in between) and goes too. (FileStore keeps the
   *   offset of the creation, 0, in the info file, so today deleteExpired already removes these.)
   * Whatever is still here past the expiry after the library's pass is therefore one of these.
   */
  private async sweepLeftovers(): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.directory);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw err;
    }
    const expiredBefore = Date.now() - this.store.getExpiration();
    const present = new Set(names);
    const ids = new Set(names.map((n) => (n.endsWith('.json') ? n.slice(0, -5) : n)));
    let removed = 0;
    for (const id of ids) {
      const infoFile = path.join(this.directory, `${id}.json`);
      const dataFile = path.join(this.directory, id);
      const hasInfo = present.has(`${id}.json`);
      const info = hasInfo ? await this.store.configstore.get(id) : undefined;
      let created = info?.creation_date ? new Date(info.creation_date).getTime() : NaN;
      if (Number.isNaN(created)) {
        const stats = await stat(hasInfo ? infoFile : dataFile).catch(() => null);
        if (!stats?.isFile()) continue;
        created = stats.mtimeMs;
      }
      if (created >= expiredBefore) continue;
      await rm(dataFile, { force: true });
      await rm(infoFile, { force: true });
      removed++;
    }
    return removed;
  }
}
