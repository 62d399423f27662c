import { accountSchemas } from './accounts/entities.js';
import { speechJobSchemas } from './speech/jobs/entities.js';
import { SpeechWorkerSchema } from './speech/workers/entities.js';

/**
 * The MikroORM entities of every domain, for the ORM set-up (db/orm.ts). Assembled here, beside the
 * other wiring of the domains (deps.ts, service.ts), so that db/ imports no domain folder.
 */
export const entitySchemas = [...accountSchemas, SpeechWorkerSchema, ...speechJobSchemas];
