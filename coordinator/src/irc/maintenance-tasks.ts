import type { Logger } from 'pino';
import type { Orm } from '../db/orm.js';
import type { MaintenanceTask } from '../queue/maintenance.js';
import { IrcCommonTerms } from './common-terms.js';

/** The chat-log archive's periodic housekeeping (run by the maintenance queue, queue/maintenance.ts). */
export function ircMaintenanceTasks(orm: Orm, logger: Logger): MaintenanceTask[] {
  return [
    {
      // Imports refresh the archive's common terms themselves; this follows what the live logger adds.
      name: 'irc-common-terms',
      everyMs: 6 * 3600_000,
      run: async () => {
        const change = await new IrcCommonTerms(orm).refresh();
        if (change.changed) logger.info({ changed: change.changed, rebuilt: change.rebuilt, common: change.common }, 'chat-log common terms changed');
        return { changed: change.changed, rebuilt: change.rebuilt };
      },
    },
  ];
}
