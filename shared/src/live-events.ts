/**
 * The socket.io contract of the live job hub (coordinator/src/speech/live/live-hub.ts) and the
 * browser pages that listen to it (coordinator/web). Both sides type their sockets with these
 * maps, so a renamed or retyped field fails the type-check of the server and of the bundled pages.
 * Types only: the browser imports it as `@sonar/shared/live-events`.
 */

/** One transcript segment (times in seconds of the media; `speaker` a key like `S1`, null while unlabelled). */
export interface LiveSegment {
  seq: number;
  start: number;
  end: number;
  text: string;
  speaker: string | null;
}

export interface LiveStatus {
  status: string;
  status_label: string;
  stage_label: string | null;
  stage_detail: string | null;
  audio_position_seconds: number;
  attempt: number;
}

/** The diarization of a job changed: it started, or it ended and (completed) labelled these segments. */
export interface LiveDiarization {
  state: string;
  speaker_count: number | null;
  /** Segment seq → speaker key, when a completed diarization labelled the pass. */
  speakers?: Array<{ seq: number; speaker: string }>;
  /**
   * The whole labelled pass, when a completed diarization labelled it: segments whose words change
   * speaker were split and the pass renumbered, so clients replace the segments they show.
   */
  segments?: LiveSegment[];
}

/** An analysis, translation or automatic title of the current pass changed state (socket.io event `analysis`). */
export interface LiveAi {
  kind: 'analysis' | 'translation' | 'title';
  state: string;
  /** The translation's target language; the analysis language (null: the transcript's own). */
  language: string | null;
  /** An automatic title that was applied. */
  title?: string;
}

/**
 * Something else about a job changed that its page shows (socket.io event `changed`): a runtime-log
 * entry (a share, staging, a callback…), a cancellation request, the execution target, speaker names, the title or note.
 * The page fetches its cards again; the event carries no state of its own.
 */
export type JobChange = 'log' | 'cancel' | 'target' | 'speakers' | 'metadata' | 'transcript';

/** The answer to `subscribe`: the job's current state, sent once before its live events. */
export interface LiveSnapshot {
  job_id: number;
  pass: number;
  status: string;
  stage_label: string | null;
  audio_position_seconds: number;
  segments: LiveSegment[];
}

/** Every event names the job it is about (a socket may follow several). */
type OfJob<T> = { job_id: number } & T;

/** What the hub sends to a subscribed socket. */
export interface ServerToClientEvents {
  snapshot: (snapshot: LiveSnapshot) => void;
  segment: (segment: OfJob<LiveSegment & { pass: number }>) => void;
  status: (status: OfJob<LiveStatus>) => void;
  diarization: (update: OfJob<LiveDiarization>) => void;
  analysis: (update: OfJob<LiveAi>) => void;
  changed: (change: OfJob<{ what: JobChange }>) => void;
}

/** The reply to `subscribe`: `validation_failed` for a job id that is not a positive integer, `not_found` for one the user may not see. */
export type LiveSubscribeReply = { ok: true } | { ok: false; reason: 'validation_failed' | 'not_found' };

/** What a client sends. Payloads are checked at run time as well: a socket may send anything. */
export interface ClientToServerEvents {
  subscribe: (request: { jobId: number }, ack?: (reply: LiveSubscribeReply) => void) => void;
  unsubscribe: (request: { jobId: number }) => void;
}
