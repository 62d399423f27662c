import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { MaintenanceTask } from '../queue/maintenance.js';
import type { SpeechServices } from './speech-services.js';

/** The speech domain's periodic housekeeping (run by the maintenance queue, queue/maintenance.ts). */
export function speechMaintenanceTasks(speech: SpeechServices, config: Pick<Config, 'SPEECH_STALE_SWEEP_SECONDS'>, logger: Logger): MaintenanceTask[] {
  return [
    {
      name: 'speech-stale-sweep',
      everyMs: config.SPEECH_STALE_SWEEP_SECONDS * 1000,
      run: async () => {
        const touched = await speech.leases.sweepExpired();
        if (touched.length) logger.warn({ touched }, 'expired speech leases recovered');
        return { touched: touched.length };
      },
    },
    {
      name: 'speech-upload-expiry',
      everyMs: 15 * 60_000,
      run: async () => {
        const removed = await speech.uploads.cleanupExpired();
        if (removed) logger.info({ removed }, 'expired unfinished resumable uploads removed');
        return { removed };
      },
    },
    {
      name: 'speech-media-release',
      everyMs: 15 * 60_000,
      run: async () => {
        const released = await speech.retention.releaseExpired();
        if (released.length) logger.info({ released }, 'retained speech media released');
        return { released: released.length };
      },
    },
  ];
}
