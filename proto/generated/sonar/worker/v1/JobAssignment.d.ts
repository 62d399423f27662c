// Original file: worker.proto

import type { LeaseRef as _sonar_worker_v1_LeaseRef, LeaseRef__Output as _sonar_worker_v1_LeaseRef__Output } from '../../../sonar/worker/v1/LeaseRef.js';
import type { Long } from '@grpc/proto-loader';

export interface JobAssignment {
  'lease'?: (_sonar_worker_v1_LeaseRef | null);
  'lease_expires_unix_ms'?: (number | string | Long);
  'pass'?: (number);
  'model'?: (string);
  /**
   * Empty: detect.
   */
  'language'?: (string);
  /**
   * "url" or "upload".
   */
  'source_type'?: (string);
  /**
   * Set when the worker downloads the source itself.
   */
  'source_url'?: (string);
  /**
   * True: download the media with FetchMedia and check it against media_sha256.
   */
  'media_from_coordinator'?: (boolean);
  'media_sha256'?: (string);
  'media_size_bytes'?: (number | string | Long);
  'source_filename'?: (string);
  'duration_seconds'?: (number | string);
  'diarization'?: (boolean);
  /**
   * True when an administrator pinned the job to this worker (it may not have the model).
   */
  'forced'?: (boolean);
  /**
   * Contract 3: what to do. "transcribe" (empty means the same): transcribe the pass, stream its
   * segments, then diarize it when `diarization` is set, and Complete with both.
   * "diarize": a diarization rerun of a completed job: get the media, diarize, Complete with the
   * diarization only (success=true, no segments), unless `regenerate_segments` is set.
   */
  'task'?: (string);
  /**
   * Contract 3, task "diarize": the stored pass has no timestamped segments; transcribe it first
   * with `model` (stream the segments as in a transcription), then diarize.
   */
  'regenerate_segments'?: (boolean);
  /**
   * Contract 5: the speaker count the submitter stated, for the diarization of this assignment
   * (a transcription with `diarization`, or a "diarize" rerun); 0 means not stated. Either
   * `num_speakers` (exactly that many speakers) or the bounds `min_speakers` / `max_speakers`
   * (either may be 0: no bound on that side), each 1..32. The diarizer must honour them: its
   * speaker_count lies within what was stated. Jobs with a stated count are never handed to a
   * worker of an older contract (it would ignore these fields).
   */
  'num_speakers'?: (number);
  'min_speakers'?: (number);
  'max_speakers'?: (number);
}

export interface JobAssignment__Output {
  'lease': (_sonar_worker_v1_LeaseRef__Output | null);
  'lease_expires_unix_ms': (number);
  'pass': (number);
  'model': (string);
  /**
   * Empty: detect.
   */
  'language': (string);
  /**
   * "url" or "upload".
   */
  'source_type': (string);
  /**
   * Set when the worker downloads the source itself.
   */
  'source_url': (string);
  /**
   * True: download the media with FetchMedia and check it against media_sha256.
   */
  'media_from_coordinator': (boolean);
  'media_sha256': (string);
  'media_size_bytes': (number);
  'source_filename': (string);
  'duration_seconds': (number);
  'diarization': (boolean);
  /**
   * True when an administrator pinned the job to this worker (it may not have the model).
   */
  'forced': (boolean);
  /**
   * Contract 3: what to do. "transcribe" (empty means the same): transcribe the pass, stream its
   * segments, then diarize it when `diarization` is set, and Complete with both.
   * "diarize": a diarization rerun of a completed job: get the media, diarize, Complete with the
   * diarization only (success=true, no segments), unless `regenerate_segments` is set.
   */
  'task': (string);
  /**
   * Contract 3, task "diarize": the stored pass has no timestamped segments; transcribe it first
   * with `model` (stream the segments as in a transcription), then diarize.
   */
  'regenerate_segments': (boolean);
  /**
   * Contract 5: the speaker count the submitter stated, for the diarization of this assignment
   * (a transcription with `diarization`, or a "diarize" rerun); 0 means not stated. Either
   * `num_speakers` (exactly that many speakers) or the bounds `min_speakers` / `max_speakers`
   * (either may be 0: no bound on that side), each 1..32. The diarizer must honour them: its
   * speaker_count lies within what was stated. Jobs with a stated count are never handed to a
   * worker of an older contract (it would ignore these fields).
   */
  'num_speakers': (number);
  'min_speakers': (number);
  'max_speakers': (number);
}
