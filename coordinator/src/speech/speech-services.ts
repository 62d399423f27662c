import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import type { Orm } from '../db/orm.js';
import { WorkAvailable } from './jobs/job-events.js';
import { JobService } from './jobs/job-service.js';
import { MediaStore } from './jobs/media-store.js';
import { LiveHub } from './live/live-hub.js';
import { LeaseService } from './protocol/lease-service.js';
import { MediaStager } from './jobs/media-stager.js';

/** The speech domain's long-lived services, shared by HTTP routes, socket.io and the gRPC server. */
export interface SpeechServices {
  media: MediaStore;
  work: WorkAvailable;
  live: LiveHub;
  jobs: JobService;
  leases: LeaseService;
  stager: MediaStager;
}

export function createSpeechServices(deps: { orm: Orm; redis: Redis; config: Config }): SpeechServices {
  const { orm, redis, config } = deps;
  const media = new MediaStore(config.SPEECH_MEDIA_DIR);
  const work = new WorkAvailable(redis, `${config.REDIS_KEY_PREFIX}speech:work`);
  const live = new LiveHub(redis, config.REDIS_KEY_PREFIX);
  const jobs = new JobService(orm, config, media, work, live);
  const leases = new LeaseService(orm, config, work, live);
  const stager = new MediaStager(orm, redis, config, media, work);
  return { media, work, live, jobs, leases, stager };
}
