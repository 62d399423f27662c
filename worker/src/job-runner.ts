import { mkdtemp, rm } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  OutboundRefused,
  fetchDownloadFailure,
  httpDownloadFailure,
  notMediaFailure,
  type ClaimResponseMsg,
  type DownloadFailure,
  type JobAssignmentMsg,
  type OutboundPolicy,
  type ProgressStage,
} from '@sonar/shared';
import { AttemptProgress, retryTransient } from './attempt-progress.js';
import { workerErrorReason, type CoordinatorClient } from './coordinator-client.js';
import type { Segment, TranscriptionEngine } from './engines/types.js';

export type JobOutcome = 'completed' | 'failed' | 'cancelled' | 'lost' | 'released';

/** Why a running job was stopped from outside: the coordinator asked, the lease is gone, or we shut down. */
export type StopReason = 'cancel' | 'lost' | 'shutdown';

/**
 * How the attempt's completion claims the worker's next job in the same call (contract 4,
 * CompleteRequest.claim_next): the agent decides whether it may, and takes what comes back.
 */
export interface NextClaim {
  /** Read as each Complete is sent: the session to claim under, or null to claim nothing (stopping, or a coordinator older than contract 4). */
  session(): string | null;
  /** The claim a completion carried back (CompleteResponse.next; has_job false when nothing was there). */
  claimed(res: ClaimResponseMsg): void;
}

/** The claim_next fields of a Complete (none when `next` says not to claim). */
function claimNextFields(next: NextClaim | undefined): { claim_next?: boolean; session_id?: string } {
  const session = next?.session() ?? null;
  return session ? { claim_next: true, session_id: session } : {};
}

export interface JobRunnerDeps {
  client: CoordinatorClient;
  /** Chooses the engine and model for a job; null when this worker cannot run it at all. */
  pickEngine(model: string, forced: boolean): { engine: TranscriptionEngine; model: string } | null;
  decode(input: string, output: string, signal: AbortSignal): Promise<{ durationSeconds: number }>;
  /** Source URLs are downloaded under this outbound (SSRF) policy, like the coordinator's downloads. */
  outbound: OutboundPolicy;
  workDir?: string;
  log(level: 'info' | 'warn' | 'error', obj: object, msg: string): void;
  /** Speaker diarization on the decoded audio; absent: this worker cannot diarize (`diarizerUnavailable` says why). */
  diarizer?: JobDiarizer | undefined;
  diarizerUnavailable?: string | undefined;
}

/** The diarizer as the job runner uses it (see ./diarization): speaker turns of 16 kHz mono audio. */
export interface JobDiarizer {
  readonly name: string;
  diarize(
    wavPath: string,
    signal: AbortSignal,
    speakers?: SpeakerBounds,
  ): Promise<{ engine: string; speakerCount: number; turns: Array<{ start: number; end: number; speaker: number }> }>;
}

type DiarizationReport = NonNullable<Parameters<CoordinatorClient['complete']>[0]['diarization']>;

/** The speaker count stated for a job's diarization (contract 5), as the engines take it; empty: the engine counts. */
export interface SpeakerBounds {
  minSpeakers?: number;
  maxSpeakers?: number;
}

/**
 * The assignment's stated speaker count: num_speakers is both bounds; 0 means not stated. A
 * contract-5 coordinator never sends num_speakers with a bound, nor min above max; were it to,
 * num_speakers wins and crossed bounds collapse to max_speakers.
 */
export function speakerBounds(job: Pick<JobAssignmentMsg, 'num_speakers' | 'min_speakers' | 'max_speakers'>): SpeakerBounds {
  const n = job.num_speakers ?? 0;
  if (n > 0) return { minSpeakers: n, maxSpeakers: n };
  const min = job.min_speakers ?? 0;
  const max = job.max_speakers ?? 0;
  return {
    ...(min > 0 ? { minSpeakers: max > 0 ? Math.min(min, max) : min } : {}),
    ...(max > 0 ? { maxSpeakers: max } : {}),
  };
}

/** Stage detail while the diarizer runs. */
const DIARIZING_DETAIL = 'Identifying speakers';

class LeaseLost extends Error {}

/** How long a finished attempt keeps trying to reach a coordinator that is away (its lease decides before that). */
const REPORT_GIVE_UP_MS = 10 * 60_000;
/** The engine's audio position goes to the coordinator at most this often between segments. */
const POSITION_REPORT_MS = 1000;
/** Stage detail of an attempt whose engine found no speech at all (silence, or an empty recording). */
export const NO_SPEECH_DETAIL = 'No speech detected';

/**
 * Runs one claimed job attempt: get the media (from the URL, or lease-bound from the coordinator
 * with a checksum), decode to 16 kHz mono, stream every completed segment on the attempt's progress
 * stream, then complete. A stop signal ends it as cancelled (Complete), lost (nothing more is sent)
 * or released (handed back for another worker). `next`: the completion also claims the worker's
 * next job (contract 4) when it says so.
 */
export async function runJob(deps: JobRunnerDeps, job: JobAssignmentMsg, stop: AbortSignal, next?: NextClaim): Promise<JobOutcome> {
  const { client } = deps;
  const lease = job.lease;
  const dir = await mkdtemp(path.join(deps.workDir ?? tmpdir(), `sonar-job-${lease.job_id}-`));
  const engineAbort = new AbortController();
  const onStop = () => engineAbort.abort(stop.reason);
  stop.addEventListener('abort', onStop, { once: true });
  // Survives coordinator restarts: a broken stream is reopened and the attempt's segments resent.
  const progress = new AttemptProgress(client, lease);
  // A refused lease stops the engine at once.
  progress.lost.catch(() => engineAbort.abort('lost' satisfies StopReason));
  // A diarization rerun transcribes only when the pass lost its timestamped segments.
  const rerun = job.task === 'diarize';
  const transcribe = !rerun || job.regenerate_segments;
  const picked = transcribe ? deps.pickEngine(job.model, job.forced) : null;
  let duration = job.duration_seconds;
  let seq = 0;
  const send = (stage: ProgressStage, detail: string, position: number, segments: Segment[] = [], diarizationState = '') =>
    progress.send({
      stage,
      stage_detail: detail,
      audio_position_seconds: position,
      segments: segments.map((s) => ({ seq: seq++, start: s.start, end: s.end, text: s.text, words: s.words ?? [] })),
      duration_seconds: duration,
      engine: picked?.engine.name ?? '',
      engine_model: picked?.model ?? '',
      diarization_state: diarizationState,
    });
  let diarization: DiarizationReport | null = null;

  try {
    if (transcribe && !picked) throw new Error(`this worker has no engine for model "${job.model}"${rerun ? ' to regenerate the segments' : ''}`);
    const source = path.join(dir, 'source');
    if (job.media_from_coordinator) {
      send('downloading', 'fetching media from the coordinator', 0);
      await client.fetchMedia(lease, source, engineAbort.signal);
    } else {
      send('downloading', 'downloading the source URL', 0);
      await download(deps.outbound, job.source_url, source, engineAbort.signal);
    }
    send('transcribing', 'decoding audio', 0);
    const wav = path.join(dir, 'audio.wav');
    try {
      duration = (await deps.decode(source, wav, engineAbort.signal)).durationSeconds || duration;
    } catch (err) {
      // A missing ffmpeg is the worker's problem, not the recording's: that error stays as it is.
      if (engineAbort.signal.aborted || (err as NodeJS.ErrnoException).code === 'ENOENT') throw err;
      const f = notMediaFailure(err instanceof Error ? err.message : String(err));
      throw new Error(`The source cannot be read: ${f.message} (technical: ${f.code.slice(0, 500)})`, { cause: err });
    }
    let lastEnd = 0;
    let reported = 0;
    let progressSentAt = 0;
    if (picked) {
      send('transcribing', `${picked.engine.name} ${picked.model}`, 0);
      const result = await picked.engine.transcribe({
        wavPath: wav,
        model: picked.model,
        ...(job.language ? { language: job.language } : {}),
        signal: engineAbort.signal,
        onSegment: (s) => {
          reported = Math.max(reported, s.end);
          send('transcribing', `${picked.engine.name} ${picked.model}`, s.end, [s]);
        },
        // The engine's position between segments (whisper.cpp's --print-progress): the page's
        // progress and estimated finish move during a long stretch without a completed segment.
        onProgress: (position) => {
          const now = Date.now();
          if (position <= reported || now - progressSentAt < POSITION_REPORT_MS) return;
          reported = position;
          progressSentAt = now;
          send('transcribing', `${picked.engine.name} ${picked.model}`, position);
        },
      });
      lastEnd = result.segments.at(-1)?.end ?? 0;
    }
    if (job.diarization || rerun) {
      send('finalizing', DIARIZING_DETAIL, duration || lastEnd, [], 'running');
      diarization = await diarize(deps, wav, engineAbort.signal, speakerBounds(job));
    }
    // A silent or empty recording: say so rather than finishing with an empty transcript.
    if (transcribe) send('finalizing', seq === 0 ? NO_SPEECH_DETAIL : 'saving the transcript', duration || lastEnd);
    await Promise.race([progress.end(REPORT_GIVE_UP_MS), progress.lost]);
    const res = await retryTransient(
      () =>
        client.complete({
          lease,
          success: true,
          error: '',
          segment_count: seq,
          duration_seconds: duration,
          engine: picked?.engine.name ?? '',
          engine_model: picked?.model ?? '',
          cancelled: false,
          diarization,
          ...claimNextFields(next),
        }),
      REPORT_GIVE_UP_MS,
    );
    if (res.next) next?.claimed(res.next);
    deps.log(
      'info',
      {
        job: lease.job_id,
        attempt: lease.attempt,
        task: rerun ? 'diarize' : 'transcribe',
        segments: seq,
        diarization: diarization?.state,
        duplicate: res.duplicate,
      },
      rerun ? `diarization ${diarization?.state ?? 'done'}` : seq === 0 ? 'job completed: no speech detected' : 'job completed',
    );
    return 'completed';
  } catch (err) {
    progress.cancel();
    const reason = (engineAbort.signal.aborted ? engineAbort.signal.reason : null) as StopReason | null;
    if (reason === 'lost' || workerErrorReason(err) === 'stale_lease' || err instanceof LeaseLost) {
      deps.log('warn', { job: lease.job_id, attempt: lease.attempt }, 'lease lost; job aborted');
      return 'lost';
    }
    if (reason === 'shutdown') {
      await client.release({ lease, reason: 'worker shutting down' }).catch((e: unknown) => deps.log('warn', { err: String(e) }, 'release failed'));
      deps.log('warn', { job: lease.job_id, attempt: lease.attempt }, 'job handed back');
      return 'released';
    }
    const cancelled = reason === 'cancel';
    const message = cancelled ? 'cancelled on request' : err instanceof Error ? err.message : String(err);
    try {
      const res = await retryTransient(
        () =>
          client.complete({
            lease,
            success: false,
            error: message.slice(0, 2000),
            segment_count: seq,
            duration_seconds: duration,
            engine: picked?.engine.name ?? '',
            engine_model: picked?.model ?? '',
            cancelled,
            ...claimNextFields(next),
          }),
        REPORT_GIVE_UP_MS,
      );
      if (res.next) next?.claimed(res.next);
    } catch (e) {
      if (workerErrorReason(e) === 'stale_lease') return 'lost';
      throw e;
    }
    deps.log(cancelled ? 'warn' : 'error', { job: lease.job_id, attempt: lease.attempt, error: message }, cancelled ? 'job cancelled' : 'job failed');
    return cancelled ? 'cancelled' : 'failed';
  } finally {
    stop.removeEventListener('abort', onStop);
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Diarizes the decoded audio for the Complete message: completed with turns, failed with the
 * diarizer's error (the transcript is not affected), or unavailable when this worker has no
 * diarizer. A stop (cancel, lost lease, shutdown) is not a diarization failure: it propagates.
 */
async function diarize(deps: JobRunnerDeps, wav: string, signal: AbortSignal, speakers: SpeakerBounds): Promise<DiarizationReport> {
  const none = { engine: '', speaker_count: 0, turns: [], error: '' };
  if (!deps.diarizer) return { ...none, state: 'unavailable', error: deps.diarizerUnavailable ?? 'this worker has no speaker diarizer' };
  try {
    const out = await deps.diarizer.diarize(wav, signal, speakers);
    return { state: 'completed', engine: out.engine, speaker_count: out.speakerCount, turns: out.turns, error: '' };
  } catch (err) {
    if (signal.aborted) throw err;
    const message = err instanceof Error ? err.message : String(err);
    deps.log('warn', { err: message }, 'diarization failed');
    return { ...none, engine: deps.diarizer.name, state: 'failed', error: message.slice(0, 2000) };
  }
}

/** How long one source download may take, redirects included (as on the coordinator). */
const DOWNLOAD_TIMEOUT_MS = 30 * 60_000;

/** The source downloads in flight: `abortDownloads` ends them. */
const inFlight = new Set<AbortController>();

/**
 * Ends every source download in flight with `reason`: each fails its attempt with "Could not
 * download the source". The agent's guard (bin.ts `containHttpClientFault`) calls it when the HTTP
 * client throws where no caller can catch it.
 */
export function abortDownloads(reason: Error): number {
  for (const controller of inFlight) controller.abort(reason);
  return inFlight.size;
}

/**
 * Downloads a job's source URL through the outbound policy: every redirect hop and the address
 * actually connected to are checked, redirects are bounded, and the job's stop signal or the
 * download deadline ends it. A refusal fails the job with the policy's reason.
 */
export async function download(outbound: OutboundPolicy, url: string, file: string, stop: AbortSignal): Promise<void> {
  if (!/^https?:\/\//i.test(url)) throw new Error('the job has no downloadable source URL');
  const fault = new AbortController();
  inFlight.add(fault);
  try {
    await downloadOnce(outbound, url, file, stop, fault.signal);
  } finally {
    inFlight.delete(fault);
  }
}

async function downloadOnce(outbound: OutboundPolicy, url: string, file: string, stop: AbortSignal, fault: AbortSignal): Promise<void> {
  const signal = AbortSignal.any([stop, fault, AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS)]);
  // The job fails with a sentence for people; the code underneath follows it for the runtime log.
  const failed = (f: DownloadFailure, cause: unknown) => new Error(`Could not download the source: ${f.message} (technical: ${f.code})`, { cause });
  const timedOut = () => !stop.aborted && !fault.aborted && signal.aborted;
  const faulted = (err: unknown) => new Error(`Could not download the source: the HTTP client failed (technical: ${String(fault.reason)})`, { cause: err });
  let res: Awaited<ReturnType<OutboundPolicy['fetch']>>;
  try {
    res = await outbound.fetch(url, { signal });
  } catch (err) {
    if (err instanceof OutboundRefused) throw new Error(`refused by the outbound policy: ${err.message}`, { cause: err });
    if (stop.aborted) throw err;
    if (fault.aborted) throw faulted(err);
    if (timedOut()) throw new Error('Could not download the source: it took longer than 30 minutes', { cause: err });
    throw failed(fetchDownloadFailure(url, err), err);
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel().catch(() => undefined);
    throw failed(httpDownloadFailure(url, res.status), null);
  }
  try {
    await pipeline(Readable.fromWeb(res.body), createWriteStream(file), { signal });
  } catch (err) {
    if (timedOut()) throw new Error('Could not download the source: it took longer than 30 minutes', { cause: err });
    if (stop.aborted) throw err;
    if (fault.aborted) throw faulted(err);
    throw failed(fetchDownloadFailure(url, err), err);
  }
}

export { LeaseLost };
