import type { FastifyServerOptions } from 'fastify';
import type { Redis } from 'ioredis';
import type { AccountService } from './accounts/account-service.js';
import type { Config } from './config.js';
import type { Orm } from './db/orm.js';
import type { Metrics } from './http/metrics.js';
import type { SpeechServices } from './speech/speech-services.js';
import type { WorkerRegistry } from './speech/workers/worker-registry.js';

/**
 * What buildApp() takes. Types only: this module imports no plugin, so the domain plugins can
 * import it without a cycle through app.ts.
 */
export interface AppDeps {
  config: Config;
  orm: Orm;
  redis: Redis;
  version: string;
  metrics?: Metrics;
  workers?: WorkerRegistry;
  speech?: SpeechServices;
  /**
   * Pino options (or false); defaults to LOG_LEVEL from the configuration. Credential redaction
   * (URLs, headers, SQL values of query errors) is added to whatever is given.
   */
  logger?: FastifyServerOptions['logger'];
}

/** Everything the app builds for its domains (also `app.deps`); each plugin takes the slice it needs. */
export interface DomainDeps {
  config: Config;
  orm: Orm;
  redis: Redis;
  accounts: AccountService;
  metrics: Metrics;
  workers: WorkerRegistry;
  speech: SpeechServices;
  version: string;
}

export type AccountsDeps = Pick<DomainDeps, 'config' | 'accounts'>;
export type SpeechDeps = Pick<DomainDeps, 'config' | 'orm' | 'accounts' | 'workers' | 'speech'>;
export type DnsDeps = Pick<DomainDeps, 'config' | 'orm' | 'accounts'>;
export type IrcDeps = Pick<DomainDeps, 'config' | 'orm' | 'redis'>;
