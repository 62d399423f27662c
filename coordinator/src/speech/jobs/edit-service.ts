import type { AuthUser } from '../../accounts/types.js';
import { forbidden, notFound, validationFailed } from '../../http/errors.js';
import type { TranscriptFiles } from './transcript-file.js';
import type { JobRepository } from './job-repository.js';
import type { JobService } from './job-service.js';
import { EditRefusal, type EditRow } from './transitions/edits.js';

/**
 * The owner's corrections of a transcript (transitions/edits.ts): who may make them (the owner;
 * others who can see the job get 403, the rest 404) and the refusals as the API's errors (404 for
 * a segment that does not exist, 422 for everything else a caller got wrong).
 */
export class EditService {
  constructor(
    private readonly jobs: JobService,
    private readonly repo: JobRepository,
    /** The TXT copy on disk follows the corrected pass (transcript-file.ts). */
    private readonly files?: Pick<TranscriptFiles, 'write'>,
  ) {}

  private async own(user: AuthUser, jobId: number) {
    const job = await this.jobs.getVisible(user, jobId);
    if (job.owner.id !== user.id) throw forbidden('Only the owner of the transcript may correct it.');
    return job;
  }

  private async run<T>(jobId: number, work: () => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await work();
    } catch (err) {
      if (!(err instanceof EditRefusal)) throw err;
      if (err.missing) throw notFound(err.message.charAt(0).toUpperCase() + err.message.slice(1) + '.');
      throw validationFailed({ [err.field]: [err.message] }, err.message);
    }
    await this.files?.write(jobId).catch(() => undefined);
    return result;
  }

  async editText(user: AuthUser, jobId: number, seq: number, text: string) {
    await this.own(user, jobId);
    return this.run(jobId, () => this.repo.editText(jobId, { id: user.id, name: user.username }, seq, text));
  }

  async moveToSpeaker(
    user: AuthUser,
    jobId: number,
    change: { seq: number; speaker: string; name?: string | undefined; fromWord?: number | undefined; toWord?: number | undefined },
  ) {
    await this.own(user, jobId);
    if ((change.fromWord === undefined) !== (change.toWord === undefined))
      throw validationFailed({ to_word: ['give both from_word and to_word for a run of words, or neither for the whole segment'] });
    return this.run(jobId, () => this.repo.moveToSpeaker(jobId, { id: user.id, name: user.username }, change));
  }

  async merge(user: AuthUser, jobId: number, from: string, into: string) {
    await this.own(user, jobId);
    return this.run(jobId, () => this.repo.mergeSpeakers(jobId, { id: user.id, name: user.username }, from, into));
  }

  async undo(user: AuthUser, jobId: number, editId?: number) {
    await this.own(user, jobId);
    return this.run(jobId, () => this.repo.undoEdit(jobId, user.username, editId));
  }

  /** The job's corrections, newest first (anyone who can see the job). */
  async list(user: AuthUser, jobId: number): Promise<EditRow[]> {
    const job = await this.jobs.getVisible(user, jobId);
    return this.repo.listEdits(job.id);
  }
}

/** An edit as the API presents it. */
export function presentEdit(e: EditRow) {
  return {
    id: e.id,
    pass: e.pass,
    kind: e.kind,
    summary: e.summary,
    author: e.author_name,
    at: new Date(e.at_ms).toISOString(),
    state: e.state,
    undone_at: e.undone_at_ms === null ? null : new Date(e.undone_at_ms).toISOString(),
    undone_by: e.undone_by,
  };
}
