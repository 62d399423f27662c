import type { OutboundPolicy } from '@sonar/shared';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import type { Orm } from '../../db/orm.js';
import type { JobRepository } from '../jobs/job-repository.js';
import { CallbackRecovery } from './callback-recovery.js';
import { CallbackService } from './callback-service.js';
import { NotificationOutbox } from './outbox.js';
import { ReportMailer } from './report-mailer.js';

export { CallbackService } from './callback-service.js';
export { ReportMailer } from './report-mailer.js';

/** What a terminal job state notifies: the API callback and the owner's completion report, through the outbox. */
export interface SpeechNotifications {
  callbacks: CallbackService;
  /** null when SMTP_URL is unset (reports disabled). */
  reports: ReportMailer | null;
  outbox: NotificationOutbox;
  /** Queues again the callbacks still owed (per PostgreSQL) whose delivery Redis lost. */
  recovery: CallbackRecovery;
  queues: Queue[];
  /** Drains the outbox pass in progress and in-flight deliveries, then closes the queues and workers. */
  close(): Promise<void>;
}

export function startSpeechNotifications(deps: {
  orm: Orm;
  repo: JobRepository;
  redis: Redis;
  config: Config;
  logger: Logger;
  prefix: string;
  outbound?: OutboundPolicy;
  /** The configured AI provider ("model at host"), named in reports. */
  aiProviderLabel?: string | null;
}): SpeechNotifications {
  const logger = deps.logger.child({ component: 'speech-notifications' });
  const callbacks = new CallbackService({ ...deps, logger }).start();
  const smtpUrl = deps.config.SMTP_URL;
  const reports = smtpUrl
    ? new ReportMailer({ ...deps, config: { ...deps.config, SMTP_URL: smtpUrl }, logger, providerLabel: deps.aiProviderLabel ?? null }).start()
    : null;
  if (!reports) logger.info('completion report e-mails are disabled (SMTP_URL is not set)');
  const outbox = new NotificationOutbox({ orm: deps.orm, callbacks, reports, logger, aiWaitSeconds: deps.config.SPEECH_AI_NOTIFY_WAIT_SECONDS }).start();
  const recovery = new CallbackRecovery({ orm: deps.orm, redis: deps.redis, callbacks, logger }).start();
  // A transition that wrote a notification row wakes the dispatcher at once; the poll is the safety net.
  deps.repo.onTerminal((_jobs, notified) => {
    if (notified) outbox.kick();
  });
  return {
    callbacks,
    reports,
    outbox,
    recovery,
    queues: [callbacks.queue, ...(reports ? [reports.queue] : [])] as Queue[],
    async close() {
      await Promise.all([outbox.close(), recovery.close()]);
      await Promise.all([callbacks.close(), reports?.close()]);
    },
  };
}
