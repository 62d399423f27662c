import type { AuthUser } from '../../accounts/types.js';
import type { Orm } from '../../db/orm.js';
import { AppError } from '../../http/errors.js';
import { SpeechJob } from '../jobs/entities.js';
import type { JobService } from '../jobs/job-service.js';
import { speakerName } from '../jobs/speakers.js';
import { presentSegment } from '../jobs/presenter.js';
import { downloadOfJob, downloadTitle, type DownloadTranscript } from '../jobs/transcript-formats.js';
import { newShareToken, SHARE_TOKEN_PATTERN } from './share-links.js';

/** What the public page may show: the transcript, never the owner or internal references. */
export interface PublicTranscript {
  title: string;
  status: SpeechJob['status'];
  language: string | null;
  durationSeconds: number | null;
  finishedAt: Date | null;
  /** The segments with the speakers' names (the detailed view). */
  segments: Array<{ start: number; end: number; text: string; speaker: string | null }>;
  /**
   * The transcript as the downloads read it: the same as the signed-in API's (downloadOfJob), less
   * the job's id. Its `turns` are the diarizer's speaker turns (null without a completed diarization).
   */
  download: DownloadTranscript;
  /**
   * The retained media when the owner allows playback on the share page (null otherwise, and once
   * the media was released); `released` says the owner allowed it but the media is gone.
   */
  playback: { mediaPath: string | null; sourceMime: string | null; durationSeconds: number | null } | null;
}

/**
 * Public transcript shares. A share is a random token on the job: enabling issues a token (or
 * keeps the active one), disabling stamps `share_disabled_at` so the old link stops working, and
 * enabling again issues a NEW token. Token-API jobs get a share automatically on completion
 * (LeaseService.complete).
 */
export class ShareService {
  constructor(
    private readonly orm: Orm,
    private readonly jobs: JobService,
  ) {}

  private conn() {
    return this.orm.em.fork().getConnection();
  }

  /** Creates or re-enables the share of a completed job the caller may change (owner or manager). */
  async enable(user: AuthUser, jobId: number): Promise<SpeechJob> {
    const job = await this.jobs.getVisible(user, jobId);
    if (job.status !== 'completed') {
      const message = `only a completed transcript can be shared; this job is ${job.status}`;
      throw new AppError('validation_failed', message, { errors: { status: [message] } });
    }
    const rows = await this.conn().execute<Array<{ id: number }>>(
      `update speech_jobs set share_token = ?, share_created_at = now(), share_disabled_at = null, share_playback = false, updated_at = now()
        where id = ? and status = 'completed' and (share_token is null or share_disabled_at is not null) returning id`,
      [newShareToken(), job.id],
    );
    if (rows.length) await this.jobs.log(job.id, 'share_created', `Public share created by ${user.username}.`);
    return this.jobs.getVisible(user, jobId);
  }

  /** Disables the share (idempotent); its link answers 404 from now on. */
  async disable(user: AuthUser, jobId: number): Promise<SpeechJob> {
    const job = await this.jobs.getVisible(user, jobId);
    const rows = await this.conn().execute<Array<{ id: number }>>(
      `update speech_jobs set share_disabled_at = now(), updated_at = now()
        where id = ? and share_token is not null and share_disabled_at is null returning id`,
      [job.id],
    );
    if (rows.length) await this.jobs.log(job.id, 'share_disabled', `Public share disabled by ${user.username}.`);
    return this.jobs.getVisible(user, jobId);
  }

  /**
   * Whether the share page plays the retained media (owner or manager, an active share: 422 under
   * `errors.share` without one). Logged in the runtime log when it changes.
   */
  async setPlayback(user: AuthUser, jobId: number, playback: boolean): Promise<SpeechJob> {
    const job = await this.jobs.getVisible(user, jobId);
    if (!job.shareToken || job.shareDisabledAt) {
      const message = 'the transcript has no active public link; create one first';
      throw new AppError('validation_failed', message, { errors: { share: [message] } });
    }
    const rows = await this.conn().execute<Array<{ id: number }>>(
      `update speech_jobs set share_playback = ?, updated_at = now()
        where id = ? and share_token is not null and share_disabled_at is null and share_playback <> ? returning id`,
      [playback, job.id, playback],
    );
    if (rows.length) await this.jobs.log(job.id, 'share_playback', `Playback on the public page ${playback ? 'allowed' : 'turned off'} by ${user.username}.`);
    return this.jobs.getVisible(user, jobId);
  }

  /** The transcript behind an active share token, or null (unknown, malformed or disabled). */
  async findPublic(token: string): Promise<PublicTranscript | null> {
    if (!SHARE_TOKEN_PATTERN.test(token)) return null;
    const em = this.orm.em.fork();
    const job = await em.findOne(SpeechJob, { shareToken: token, shareDisabledAt: null });
    if (!job) return null;
    const segments = await this.jobs.segments(job.id, job.currentPass);
    const download = downloadOfJob(job, segments, { shared: true });
    return {
      // The title the owner chose (or the uploaded file's name); never the source URL, which may be private.
      title: downloadTitle(job),
      status: job.status,
      language: job.language,
      durationSeconds: download.durationSeconds,
      finishedAt: job.finishedAt,
      // Speakers by the names the owner gave them in the speaker editor ("Speaker N" otherwise).
      segments: segments.map((seg) => ({ ...presentSegment(seg), speaker: seg.speaker ? speakerName(seg.speaker, job.speakerLabels) : null })),
      download,
      playback: job.sharePlayback ? { mediaPath: job.mediaPath, sourceMime: job.sourceMime, durationSeconds: job.sourceDurationSeconds } : null,
    };
  }
}
