import { PERMISSIONS, TOKEN_SCOPES } from '@sonar/shared';
import { AppError } from '../http/errors.js';
import { jsonMode } from './program.js';

/** The database's schema is behind this CLI: a command would fail on missing tables or columns. */
export class SchemaNotCurrent extends Error {}

/** A database error (MikroORM wraps the driver's); asked only on failure, when the ORM is mostly loaded anyway. */
export async function isDriverError(err: unknown): Promise<boolean> {
  // pg's own DatabaseError (a refused login while connecting) carries the server's severity.
  if (err instanceof Error && typeof (err as { severity?: unknown }).severity === 'string') return true;
  const { DriverException } = await import('@mikro-orm/core');
  return err instanceof DriverException;
}

/** Expected failures get one clear line (no stack); anything else is a bug and keeps its stack. */
export function reportError(err: unknown, driverError: boolean): number {
  if (err instanceof SchemaNotCurrent) {
    console.error(`error: ${err.message}`);
    if (jsonMode()) console.log(JSON.stringify({ ok: false, reason: 'schema_not_current', message: err.message }, null, 2));
    return 1;
  }
  if (err instanceof AppError) {
    const errors = err.details.errors ?? {};
    // The service names only the bad values; tell the operator what would have been accepted.
    const hint = errors.permissions ? `valid permissions: ${PERMISSIONS.join(', ')}` : errors.scopes ? `valid scopes: ${TOKEN_SCOPES.join(', ')}` : undefined;
    console.error(`error: ${err.message}`);
    for (const [field, messages] of Object.entries(errors)) {
      for (const m of messages) if (m !== err.message) console.error(`  ${field}: ${m}`);
    }
    if (hint) console.error(`  ${hint}`);
    if (jsonMode()) console.log(JSON.stringify({ ok: false, reason: err.reason, message: err.message, errors, ...(hint ? { hint } : {}) }, null, 2));
    return 1;
  }
  if (err instanceof Error && err.name === 'AssistantError') {
    // The connector's own errors (assistant/assistant-service.ts): a code and a message for people.
    const code = (err as Error & { code: string }).code;
    console.error(`error: ${err.message}`);
    if (jsonMode()) console.log(JSON.stringify({ ok: false, reason: code, message: err.message }, null, 2));
    return 1;
  }
  if (err instanceof Error && (driverError || (err as { code?: string }).code === 'ECONNREFUSED')) {
    // Driver messages start with the whole SQL statement; the reason is after the last " - ".
    const { message } = err;
    const cut = message.lastIndexOf(' - ');
    console.error(`error: database: ${cut < 0 ? message : message.slice(cut + 3)}`);
    return 1;
  }
  console.error(err);
  return 1;
}

export function fail(reason: 'not_found' | 'validation_failed', message: string): never {
  throw new AppError(reason, message);
}
