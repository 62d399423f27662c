import type { FastifyInstance } from 'fastify';
import formBody from '@fastify/formbody';
import fastifyMultipart from '@fastify/multipart';
import { installDomainErrors, okReasonBody } from '../http/errors.js';
import type { SpeechDeps } from '../deps.js';
import { MULTIPART_LIMITS } from './host-limits.js';
import { speechJobRoutes } from './jobs-routes.js';
import { speechPages } from './pages.js';
import { speechTokenApiRoutes } from './token-api-routes.js';
import { runNowRoute } from './run-now.js';
import { diarizationRoutes } from './diarization/diarization-routes.js';
import { speechRevisionRoutes } from './revisions-routes.js';
import { ShareService } from './shares/share-service.js';
import { shareRoutes } from './shares/share-routes.js';
import { sharePage } from './shares/share-page.js';
import { speechUploadRoutes } from './uploads/tus-routes.js';
import { AiService } from './ai/ai-service.js';
import { aiRoutes } from './ai/ai-routes.js';
import { transcriptRoutes } from './transcript-routes.js';
import { playbackRoutes } from './playback-routes.js';
import { editRoutes } from './edit-routes.js';

/** Speech transcription queue (/api/speech, /speech, /shared/speech): validation failures are 422. */
export async function speechPlugin(app: FastifyInstance, deps: SpeechDeps) {
  installDomainErrors(app, okReasonBody);
  // Body parsers of this domain only: urlencoded forms, and multipart uploads that the job route
  // streams to disk itself (the parser reads nothing before the handler asks for the parts).
  await app.register(formBody);
  await app.register(fastifyMultipart, { limits: { ...MULTIPART_LIMITS }, throwFileSizeLimit: true });
  await speechJobRoutes(app, deps); // signed-in API: /api/speech/status, /api/speech/jobs*
  await speechTokenApiRoutes(app, deps); // token API: /api/speech/transcribe*
  await speechRevisionRoutes(app, deps); // /api/speech/jobs/{jobId}/revisions and /retranscribe
  await transcriptRoutes(app, deps); // /api/speech/jobs/{jobId}/transcript.{txt,srt,vtt,json,docx,rttm}
  await playbackRoutes(app, deps); // /api/speech/jobs/{jobId}/media and /peaks
  await editRoutes(app, deps); // the owner's corrections: /segments/{seq}, /speakers/merge, /edits
  await runNowRoute(app, deps);
  await diarizationRoutes(app, deps);
  await aiRoutes(app, deps, new AiService(deps.speech.jobs, deps.speech.repo, deps.speech.ai));
  // Resumable uploads (tus): their own context for the application/offset+octet-stream parser.
  await app.register(async (tus) => speechUploadRoutes(tus, deps));
  const shares = new ShareService(deps.orm, deps.speech.jobs);
  await shareRoutes(app, deps, shares);
  // The public share page answers in HTML without sign-in: its own context and error handler.
  await app.register(async (page) => sharePage(page, shares));
  // Pages answer errors in HTML (and send anonymous visitors to sign in), so they get their own context.
  await app.register(async (pages) => speechPages(pages, deps, shares));
}
