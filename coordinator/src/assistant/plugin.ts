import type { FastifyInstance } from 'fastify';
import { installDomainErrors, okReasonBody } from '../http/errors.js';

/** Organization assistant connector (/api/ai/assistant, /admin/assistant). */
export async function assistantPlugin(app: FastifyInstance) {
  installDomainErrors(app, okReasonBody);
}
