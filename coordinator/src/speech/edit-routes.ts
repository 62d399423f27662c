import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema, safeString } from '@sonar/shared';
import { userOf } from '../accounts/auth-plugin.js';
import type { AuthRequirement } from '../accounts/types.js';
import type { SpeechDeps } from '../deps.js';
import { EditService, presentEdit } from './jobs/edit-service.js';
import { speechRateLimit } from './policy.js';
import { jobIdParams } from './schemas.js';

const speechUser: AuthRequirement = { accept: ['session', 'jwt'], permissions: ['speech.use'] };
const security: Array<Record<string, string[]>> = [{ session: [] }, { bearerJwt: [] }];
const tags = ['speech'];
const errors = { 401: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 422: errorBodySchema, 429: errorBodySchema };
const csrfNote = 'From a browser session the request needs the `X-CSRF-Token` header.';
const rules =
  'Only the job’s owner corrects its transcript (others who can see the job get 403, everyone else 404); the job must be ' +
  'completed and its speakers not being identified again (422). The correction changes the current pass where every reader ' +
  'reads it — the downloads (TXT, SRT, WebVTT, JSON, DOCX, and RTTM, whose turns then come from the corrected segments), the ' +
  'share page, the speaker counts and the speaker-aware transcript — is stored with its author and time ' +
  '(`GET /api/speech/jobs/{jobId}/edits`) and can be undone (`POST /api/speech/jobs/{jobId}/edits/undo`); an analysis or ' +
  'translation made before it is shown as out of date. Open job pages follow it live. ';
const speakerKey = z.string().regex(/^S[1-9][0-9]{0,3}$/, 'a speaker key such as S1');
const segParams = jobIdParams.extend({ seq: z.coerce.number().int().min(0).max(1_000_000) });
const done = z.object({ ok: z.literal(true), message: z.string(), edit_id: z.number().int() });
const editSchema = z.object({
  id: z.number().int(),
  pass: z.number().int(),
  kind: z.enum(['text', 'speaker', 'merge']),
  summary: z.string(),
  author: z.string(),
  at: z.string(),
  state: z.enum(['active', 'undone', 'superseded']).describe('`superseded`: a diarization rerun started the speakers afresh; the correction stays here'),
  undone_at: z.string().nullable(),
  undone_by: z.string().nullable(),
});

/** Signed-in API: the owner's corrections of a transcript (transitions/edits.ts), their history and undo. */
export async function editRoutes(app: FastifyInstance, deps: Pick<SpeechDeps, 'config' | 'speech'>) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const edits = new EditService(deps.speech.jobs, deps.speech.repo, deps.speech.files);
  const config = { auth: speechUser, rateLimit: speechRateLimit(deps.config) };

  r.patch('/api/speech/jobs/:jobId/segments/:seq', {
    config,
    schema: {
      tags,
      security,
      summary: 'Correct the text of a segment',
      description:
        'Replaces the text of segment `seq` of the current pass (404 when it has none). Its word times are kept when the new ' +
        'text has as many words as the old (each word takes its new spelling), else the segment loses them. ' +
        rules +
        csrfNote,
      params: segParams,
      body: z.object({ text: safeString().max(2000).describe('The corrected text (not empty)') }).strict(),
      response: { 200: done, ...errors },
    },
    handler: async (request) => {
      const id = await edits.editText(userOf(request), request.params.jobId, request.params.seq, request.body.text);
      return { ok: true as const, message: 'Segment corrected.', edit_id: id };
    },
  });

  r.post('/api/speech/jobs/:jobId/segments/:seq/speaker', {
    config,
    schema: {
      tags,
      security,
      summary: 'Move a segment, or a run of its words, to another speaker',
      description:
        '`speaker`: a key of the transcript (`S2`) or `new` for a speaker it does not have yet (named `name` when given). ' +
        'Without `from_word`/`to_word` the whole segment moves; with them (0-based, inclusive, within the segment’s words) ' +
        'that run of words becomes a segment of its own, and what is before and after it stays with the old speaker (the ' +
        'segments after it are renumbered). ' +
        rules +
        csrfNote,
      params: segParams,
      body: z
        .object({
          speaker: z.union([speakerKey, z.literal('new')]),
          name: safeString().max(60).optional(),
          from_word: z.number().int().min(0).max(100_000).optional(),
          to_word: z.number().int().min(0).max(100_000).optional(),
        })
        .strict(),
      response: { 200: done, ...errors },
    },
    handler: async (request) => {
      const b = request.body;
      const id = await edits.moveToSpeaker(userOf(request), request.params.jobId, {
        seq: request.params.seq,
        speaker: b.speaker,
        name: b.name,
        fromWord: b.from_word,
        toWord: b.to_word,
      });
      return { ok: true as const, message: 'Moved to the speaker.', edit_id: id };
    },
  });

  r.post('/api/speech/jobs/:jobId/speakers/merge', {
    config,
    schema: {
      tags,
      security,
      summary: 'Merge two speakers into one',
      description: 'Every segment of speaker `from` becomes `into`’s; `from`’s name is dropped and the speaker count falls by one. ' + rules + csrfNote,
      params: jobIdParams,
      body: z.object({ from: speakerKey, into: speakerKey }).strict(),
      response: { 200: done, ...errors },
    },
    handler: async (request) => {
      const id = await edits.merge(userOf(request), request.params.jobId, request.body.from, request.body.into);
      return { ok: true as const, message: 'Speakers merged.', edit_id: id };
    },
  });

  r.post('/api/speech/jobs/:jobId/edits/undo', {
    config,
    schema: {
      tags,
      security,
      summary: 'Undo the latest correction',
      description:
        'Restores the current pass as it was before its newest active correction (corrections come off in the reverse order ' +
        'they went on; `edit_id`, when given, must be that one, else 422). The correction stays in the history as `undone`. ' +
        '422 when there is none. The same owner rule as the corrections. ' +
        csrfNote,
      params: jobIdParams,
      body: z
        .object({ edit_id: z.number().int().min(1).optional() })
        .strict()
        .nullish(),
      response: { 200: done, ...errors },
    },
    handler: async (request) => {
      const id = await edits.undo(userOf(request), request.params.jobId, request.body?.edit_id);
      return { ok: true as const, message: 'Correction undone.', edit_id: id };
    },
  });

  r.get('/api/speech/jobs/:jobId/edits', {
    config,
    schema: {
      tags,
      security,
      summary: 'The corrections of a transcript, newest first',
      description:
        'Every correction of every pass of the job (up to 500), with its author, time and state. Anyone who can see the job may read them (404 otherwise).',
      params: jobIdParams,
      response: { 200: z.object({ ok: z.literal(true), edits: z.array(editSchema) }), ...errors },
    },
    handler: async (request) => ({ ok: true as const, edits: (await edits.list(userOf(request), request.params.jobId)).map(presentEdit) }),
  });
}
