import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import type { SpeechDeps } from '../../deps.js';
import { AppError, notFound, validationFailed } from '../../http/errors.js';
import { presentJob } from '../jobs/presenter.js';
import { speechRateLimit } from '../policy.js';
import { jobResponseSchema } from '../schemas.js';
import { JOB_ID_HEADER, TUS_PATH } from './tus-uploads.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['speech'];
/** PATCH and HEAD carry an upload's data in chunks: a looser throttle than the API's 120 per minute. */
const CHUNK_RATE_LIMIT = { max: 1200, timeWindow: 60_000 } as const;
const uploadIdParams = z.object({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,128}$/)
    .describe('Upload id (last segment of the upload URL)'),
});

const tusNote =
  'tus 1.0 resumable upload protocol (creation, termination and expiration extensions; `Tus-Resumable: 1.0.0`). ' +
  'Upload-Metadata carries `filename` and the job settings of a multipart submission: `source_label`, `source_note`, ' +
  '`model`, `language`, `analysis_language`, `translation_target_languages` (comma-separated), `disable_diarization`, ' +
  '`num_speakers` or `min_speakers` / `max_speakers` (validated when the upload is created: 422 under the field). ' +
  'Upload-Length is required and limited to the effective upload limit (413 above it). When the last chunk arrives the ' +
  `job is queued exactly like a multipart upload and its id is answered in \`${JOB_ID_HEADER}\` (422 with ` +
  '`errors.media_file` when the file is not usable audio or video). An upload belongs to its creator; other users get 404. ' +
  'Unfinished uploads expire after SPEECH_UPLOAD_EXPIRY_HOURS. From a browser session, POST, PATCH and DELETE need the ' +
  '`X-CSRF-Token` header.';

/**
 * The tus endpoint of the speech queue, `/api/speech/uploads`, in its own context: an
 * `application/offset+octet-stream` parser that leaves the body stream alone, the signed-in API's
 * authorization (session or JWT with `speech.use`, CSRF for session writes) through `config.auth`,
 * the ownership check, and then the raw request handed to @tus/server.
 */
/** Characters a header value may hold (RFC 9110 §5.5: visible ASCII, space, tab, obs-text). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * @tus/server copies the request headers into a WHATWG `Headers`, which throws on a control
 * character; such a request is the caller's mistake (422 naming the header), never a 500.
 */
function checkHeaderValues(request: FastifyRequest) {
  const errors: Record<string, string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    const values = Array.isArray(value) ? value : value === undefined ? [] : [value];
    if (values.some((v) => !HEADER_VALUE.test(v))) errors[name] = ['must not contain control characters'];
  }
  if (Object.keys(errors).length) throw validationFailed(errors);
}

export async function speechUploadRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const uploads = deps.speech.uploads;
  const r = app.withTypeProvider<ZodTypeProvider>();

  // The tus server reads PATCH bodies from the raw request itself.
  app.addContentTypeParser('application/offset+octet-stream', (_request, _payload, done) => done(null));

  const handleTus = async (request: FastifyRequest, reply: FastifyReply) => {
    checkHeaderValues(request);
    const user = userOf(request);
    const id = (request.params as { id?: string }).id;
    if (id !== undefined) {
      const finished = await uploads.finished(id);
      if (finished) {
        if (finished.ownerId !== user.id) throw notFound('Upload not found.');
        if (request.method === 'HEAD') {
          // A client that lost the final response resumes: the upload is complete, nothing is sent again.
          return reply
            .code(200)
            .headers({
              'tus-resumable': '1.0.0',
              'cache-control': 'no-store',
              'upload-offset': String(finished.sizeBytes),
              'upload-length': String(finished.sizeBytes),
              [JOB_ID_HEADER.toLowerCase()]: String(finished.jobId),
            })
            .send();
        }
      } else {
        const owner = await uploads.ownerOf(id);
        if (owner.exists && owner.ownerId !== user.id) throw notFound('Upload not found.');
      }
    }
    uploads.bind(request.raw, { user, log: request.log });
    reply.hijack();
    reply.raw.setHeader('x-request-id', request.id);
    try {
      await uploads.server.handle(request.raw, reply.raw);
    } catch (err) {
      request.log.error({ err }, 'tus request failed');
      if (!reply.raw.headersSent) reply.raw.writeHead(500, { 'content-type': 'text/plain' }).end('Internal server error.\n');
      else reply.raw.destroy();
    }
    return reply;
  };

  const schemaBase = { tags, security, description: tusNote };
  app.route({
    method: ['POST', 'OPTIONS'],
    url: TUS_PATH,
    config: { auth: speechUser, rateLimit: speechRateLimit(deps.config) },
    schema: { ...schemaBase, summary: 'tus: create a resumable upload (POST) or discover the server’s capabilities (OPTIONS)' },
    handler: handleTus,
  });
  app.route({
    method: ['HEAD', 'PATCH', 'DELETE'],
    url: `${TUS_PATH}/:id`,
    config: { auth: speechUser, rateLimit: CHUNK_RATE_LIMIT },
    schema: { ...schemaBase, summary: 'tus: offset of an upload (HEAD), append a chunk (PATCH), terminate it (DELETE)', params: uploadIdParams },
    handler: handleTus,
  });

  r.get(`${TUS_PATH}/:id/job`, {
    config: { auth: speechUser, rateLimit: speechRateLimit(deps.config) },
    schema: {
      tags,
      security,
      summary: 'The job a finished resumable upload queued (for clients that lost the final response)',
      description:
        'Only the upload’s creator sees it (404 otherwise, and for unknown uploads). 409 while the upload is not finished. ' +
        'A finished upload remembers its job for 7 days.',
      params: uploadIdParams,
      response: { 200: jobResponseSchema, 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 409: errorBodySchema },
    },
    handler: async (request) => {
      const user = userOf(request);
      const { id } = request.params;
      const finished = await uploads.finished(id);
      if (!finished) {
        const owner = await uploads.ownerOf(id);
        if (!owner.exists || owner.ownerId !== user.id) throw notFound('Upload not found.');
        const progress = await uploads.progress(id);
        throw new AppError('conflict', `The upload is not finished yet${progress ? ` (${progress.offset} of ${progress.size ?? '?'} bytes)` : ''}.`);
      }
      if (finished.ownerId !== user.id) throw notFound('Upload not found.');
      const job = await deps.speech.jobs.getVisible(user, finished.jobId);
      return { ok: true as const, job: presentJob(job, { publicBaseUrl: deps.config.PUBLIC_BASE_URL, availability: await deps.speech.models.snapshot() }) };
    },
  });
}
