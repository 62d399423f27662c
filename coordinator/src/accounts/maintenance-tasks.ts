import type { Logger } from 'pino';
import type { MaintenanceTask } from '../queue/maintenance.js';
import type { PgSessionStore } from './session-store.js';

/** The accounts domain's periodic housekeeping (run by the maintenance queue, queue/maintenance.ts). */
export function accountMaintenanceTasks(sessions: PgSessionStore, logger: Logger): MaintenanceTask[] {
  return [
    {
      name: 'purge-expired-sessions',
      everyMs: 15 * 60_000,
      run: async () => {
        const removed = await sessions.purgeExpired();
        if (removed) logger.info({ removed }, 'expired web sessions purged');
        return { removed };
      },
    },
  ];
}
