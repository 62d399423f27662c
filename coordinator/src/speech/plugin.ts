import type { FastifyInstance } from 'fastify';
import { installDomainErrors, okReasonBody } from '../http/errors.js';
import type { DomainDeps } from '../app.js';

/** Speech transcription queue (/api/speech, /speech, /shared/speech): validation failures are 422. */
export async function speechPlugin(app: FastifyInstance, _deps: DomainDeps) {
  installDomainErrors(app, okReasonBody);
}
