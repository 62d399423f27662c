import { OutboundPolicy } from '@sonar/shared';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import type { Orm } from '../db/orm.js';
import { WorkAvailable } from './jobs/job-events.js';
import { JobRepository } from './jobs/job-repository.js';
import { JobService } from './jobs/job-service.js';
import { TranscriptFiles } from './jobs/transcript-file.js';
import { MediaStore } from './jobs/media-store.js';
import { ModelCatalog } from './jobs/model-catalog.js';
import { LiveHub } from './live/live-hub.js';
import { LeaseService } from './protocol/lease-service.js';
import { MediaStager } from './jobs/media-stager.js';
import { MediaRetention } from './jobs/media-retention.js';
import { RetranscriptionService } from './jobs/retranscription.js';
import { DiarizationService } from './diarization/diarization-service.js';
import { RevisionRepository } from './jobs/revision-repository.js';
import { TusUploads } from './uploads/tus-uploads.js';
import { type AiProvider, NO_ACCESS_REASON, NO_PROVIDER_REASON, createAiProvider } from './ai/provider.js';

/** The speech domain's long-lived services, shared by HTTP routes, socket.io and the gRPC server. */
export interface SpeechServices {
  media: MediaStore;
  work: WorkAvailable;
  live: LiveHub;
  /** The one owner of job state (status, attempts, stage, leases, runtime log, notification outbox). */
  repo: JobRepository;
  jobs: JobService;
  /** Models registered workers really serve, and whether a connected worker takes them now. */
  models: ModelCatalog;
  leases: LeaseService;
  stager: MediaStager;
  /** SSRF guard of URL sources (submission checks and coordinator downloads). */
  outbound: OutboundPolicy;
  /** Resumable (tus) uploads under SPEECH_MEDIA_DIR/tus. */
  uploads: TusUploads;
  /** Releases retained media past media_retained_until (maintenance task speech-media-release). */
  retention: MediaRetention;
  /** The OpenAI-compatible provider of analysis, translations and titles; null when OPENAI_BASE_URL or OPENAI_MODEL is unset. */
  ai: AiProvider | null;
  /** Re-transcription with another model, and the read-only revisions of earlier passes. */
  retranscription: RetranscriptionService;
  /** Diarization reruns and the speaker editor. */
  diarization: DiarizationService;
  /** The TXT copy of each completed transcript on disk. */
  files: TranscriptFiles;
}

export function createSpeechServices(deps: { orm: Orm; redis: Redis; config: Config }): SpeechServices {
  const { orm, redis, config } = deps;
  const media = new MediaStore(config.SPEECH_MEDIA_DIR);
  const work = new WorkAvailable(redis, `${config.REDIS_KEY_PREFIX}speech:work`);
  const live = new LiveHub(redis, config.REDIS_KEY_PREFIX);
  const outbound = new OutboundPolicy(config.OUTBOUND_ALLOW_RANGES);
  const ai = createAiProvider(config);
  const repo = new JobRepository(orm, live, Boolean(config.SMTP_URL), { configured: ai !== null, noProvider: NO_PROVIDER_REASON, noAccess: NO_ACCESS_REASON });
  const jobs = new JobService(orm, config, media, work, repo, outbound);
  const files = new TranscriptFiles(media, repo, (jobId) => jobs.completedTranscript(jobId));
  const leases = new LeaseService(repo, config, work, live, files);
  const stager = new MediaStager(orm, redis, config, media, work, repo, outbound);
  const models = new ModelCatalog(orm, config);
  const uploads = new TusUploads(config, redis, jobs, media, models);
  const retention = new MediaRetention(repo, media);
  const retranscription = new RetranscriptionService(config, jobs, repo, new RevisionRepository(orm), models);
  const diarization = new DiarizationService(jobs, repo, work, files);
  return { media, work, live, repo, jobs, models, leases, stager, outbound, uploads, retention, retranscription, diarization, ai, files };
}
