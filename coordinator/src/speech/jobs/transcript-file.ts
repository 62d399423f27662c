import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { JobRepository } from './job-repository.js';
import type { MediaStore } from './media-store.js';
import { renderTranscript, type DownloadTranscript } from './transcript-formats.js';

/**
 * The auxiliary TXT copy of a completed job's transcript (the specification's "TXT artifact"):
 * `<SPEECH_MEDIA_DIR>/transcripts/<job id>.txt`, the same bytes as the `transcript.txt` download,
 * written after each completion and each diarization rerun (beside the retained media, not in the
 * job's media folder: releasing the media keeps it; deleting the job removes it). The database
 * transcript stays authoritative: when the copy cannot be written (a full disk, a folder that is
 * not one), the job stays completed and the failure is recorded on the job as degraded storage
 * (`transcript_file.state: "degraded"` with the error) and logged; the next write clears it.
 */
export class TranscriptFiles {
  constructor(
    private readonly media: Pick<MediaStore, 'transcriptFile'>,
    private readonly repo: Pick<JobRepository, 'recordTranscriptFile'>,
    private readonly load: (jobId: number) => Promise<DownloadTranscript | null>,
    private readonly log?: Pick<FastifyBaseLogger, 'warn'>,
  ) {}

  /** Writes the copy of a completed job (nothing for any other); never throws for the file itself. */
  async write(jobId: number): Promise<'written' | 'degraded' | 'skipped'> {
    const transcript = await this.load(jobId);
    if (!transcript) return 'skipped';
    const file = this.media.transcriptFile(jobId);
    const tmp = `${file}.${process.pid}.part`;
    try {
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(tmp, renderTranscript(transcript, 'txt'));
      await rename(tmp, file);
    } catch (err) {
      await rm(tmp, { force: true }).catch(() => undefined);
      const e = err as NodeJS.ErrnoException;
      const error = `${e.code ?? 'error'}: ${e.message}`;
      await this.repo.recordTranscriptFile(jobId, error);
      this.log?.warn(
        { job: jobId, file, err: error },
        'degraded storage: the TXT copy of a completed transcript could not be written (the database transcript is complete)',
      );
      return 'degraded';
    }
    await this.repo.recordTranscriptFile(jobId, null);
    return 'written';
  }
}
