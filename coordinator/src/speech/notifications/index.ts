import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import type { OutboundPolicy } from '../../http/outbound.js';
import { CallbackService, type TerminalStatus } from './callback-service.js';
import { ReportMailer } from './report-mailer.js';

export { CallbackService, startNewCallbackCycle, verifyCallbackSignature } from './callback-service.js';
export { ReportMailer } from './report-mailer.js';

/** What a terminal job state notifies: the API callback and the owner's completion report. */
export interface SpeechNotifications {
  callbacks: CallbackService;
  /** null when SMTP_URL is unset (reports disabled). */
  reports: ReportMailer | null;
  queues: Queue[];
  /** Register on LeaseService.onTerminal. */
  onTerminal(jobId: number, status: TerminalStatus): void;
  /** Drains queued adds and in-flight deliveries, then closes the queues and workers. */
  close(): Promise<void>;
}

export function startSpeechNotifications(deps: {
  orm: Orm;
  redis: Redis;
  config: Config;
  logger: Logger;
  prefix: string;
  outbound?: OutboundPolicy;
}): SpeechNotifications {
  const logger = deps.logger.child({ component: 'speech-notifications' });
  const callbacks = new CallbackService({ ...deps, logger }).start();
  const smtpUrl = deps.config.SMTP_URL;
  const reports = smtpUrl ? new ReportMailer({ ...deps, config: { ...deps.config, SMTP_URL: smtpUrl }, logger }).start() : null;
  if (!reports) logger.info('completion report e-mails are disabled (SMTP_URL is not set)');
  return {
    callbacks,
    reports,
    queues: [callbacks.queue, ...(reports ? [reports.queue] : [])] as Queue[],
    onTerminal(jobId, status) {
      callbacks.onTerminal(jobId, status);
      reports?.onTerminal(jobId, status);
    },
    async close() {
      await Promise.all([callbacks.close(), reports?.close()]);
    },
  };
}
