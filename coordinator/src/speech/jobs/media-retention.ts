import type { Orm } from '../../db/orm.js';
import type { MediaStore } from './media-store.js';

/**
 * Releases retained source media whose `media_retained_until` has passed: the job's media folder is
 * deleted, `media_path` becomes null and the runtime log gets a `media_released` entry; the job row
 * and its transcript stay. Only finished jobs (completed or failed) lose their media: a queued or
 * running job still needs it. Re-transcription and diarization reruns are unavailable afterwards.
 */
export class MediaRetention {
  constructor(
    private readonly orm: Orm,
    private readonly media: MediaStore,
  ) {}

  private get knex() {
    return this.orm.em.getConnection().getKnex();
  }

  /** One pass of the maintenance task; returns the ids of the jobs whose media was released. */
  async releaseExpired(limit = 500): Promise<number[]> {
    const released = await this.knex.transaction(async (trx) => {
      const { rows } = await trx.raw<{ rows: Array<{ id: number; retained_until: Date | string }> }>(
        `update speech_jobs j set media_path = null, updated_at = now()
          from (select id, media_retained_until from speech_jobs
                 where media_path is not null and media_retained_until is not null and media_retained_until <= now()
                   and status in ('completed', 'failed')
                 order by media_retained_until limit ? for update skip locked) due
         where j.id = due.id
         returning j.id, due.media_retained_until as retained_until`,
        [limit],
      );
      for (const row of rows) {
        const until = new Date(row.retained_until).toISOString();
        await trx.raw(`insert into speech_job_events (job_id, event, message, data) values (?, 'media_released', ?, ?::jsonb)`, [
          row.id,
          `Retained source media released (retention ended ${until}); re-transcription and diarization reruns are no longer possible.`,
          JSON.stringify({ retained_until: until }),
        ]);
      }
      return rows.map((r) => Number(r.id));
    });
    // The rows no longer point at the files: remove them after the commit.
    for (const id of released) await this.media.removeJob(id);
    return released;
  }
}
