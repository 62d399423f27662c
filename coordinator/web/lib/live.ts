import { io, type Socket } from 'socket.io-client';

/** What the live hub sends (coordinator/src/speech/live/live-hub.ts). */
export interface LiveSegment {
  job_id: number;
  pass?: number;
  seq: number;
  start: number;
  end: number;
  text: string;
  speaker: string | null;
}
export interface LiveStatus {
  job_id: number;
  status: string;
  status_label: string;
  stage_label: string | null;
  stage_detail: string | null;
  audio_position_seconds: number;
  attempt: number;
}
export interface LiveSnapshot {
  job_id: number;
  pass: number;
  status: string;
  stage_label: string | null;
  audio_position_seconds: number;
  segments: LiveSegment[];
}
export interface LiveDiarization {
  job_id: number;
  state: string;
  speakers?: Array<{ seq: number; speaker: string }>;
  /** The whole labelled pass (split at speaker changes, renumbered): replaces the segments shown. */
  segments?: Array<Omit<LiveSegment, 'job_id'>>;
}

/** One socket.io connection (session cookie) that (re)subscribes to the given jobs on every connect. */
export function connectLive(jobIds: readonly number[]): Socket {
  const socket = io({ transports: ['websocket', 'polling'] });
  socket.on('connect', () => {
    for (const jobId of jobIds) socket.emit('subscribe', { jobId });
  });
  return socket;
}
