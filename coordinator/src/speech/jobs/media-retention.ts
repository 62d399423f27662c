import type { JobRepository } from './job-repository.js';
import type { MediaStore } from './media-store.js';

/**
 * Releases retained source media whose `media_retained_until` has passed: the job's media folder is
 * deleted, `media_path` becomes null and the runtime log gets a `media_released` entry; the job row
 * and its transcript stay. Only finished jobs (completed or failed) lose their media: a queued or
 * running job still needs it. Re-transcription and diarization reruns are unavailable afterwards.
 */
export class MediaRetention {
  constructor(
    private readonly repo: JobRepository,
    private readonly media: MediaStore,
  ) {}

  /** One pass of the maintenance task; returns the ids of the jobs whose media was released. */
  async releaseExpired(limit = 500): Promise<number[]> {
    const released = await this.repo.releaseExpiredMedia(limit);
    // The rows no longer point at the files: remove them after the commit.
    for (const id of released) await this.media.removeJob(id);
    return released;
  }
}
