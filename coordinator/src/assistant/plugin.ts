import type { FastifyInstance } from 'fastify';
import { installDomainErrors, okReasonBody } from '../http/errors.js';
import type { DomainDeps } from '../app.js';

/** Organization assistant connector (/api/ai/assistant, /admin/assistant). */
export async function assistantPlugin(app: FastifyInstance, _deps: DomainDeps) {
  installDomainErrors(app, okReasonBody);
}
