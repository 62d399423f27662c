import type { ClientToServerEvents, ServerToClientEvents } from '@sonar/shared/live-events';
import { io, type Socket } from 'socket.io-client';

/** A socket typed by the live hub's contract (shared/src/live-events.ts): listeners get its payload types. */
export type LiveSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

/** One socket.io connection (session cookie) that (re)subscribes to the given jobs on every connect. */
export function connectLive(jobIds: readonly number[]): LiveSocket {
  const socket: LiveSocket = io({ transports: ['websocket', 'polling'] });
  socket.on('connect', () => {
    for (const jobId of jobIds) socket.emit('subscribe', { jobId });
  });
  return socket;
}
