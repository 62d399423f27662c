/** The one statement every outbox drain shares (drain-loop.ts): rows handed on are marked dispatched. */
import { sql, type Db, type Sql } from '../db/sql.js';

const statements = new Map<string, Sql<{ ids: number[] }, Record<string, never>>>();

/** Marks rows of the outbox table `table` (a table name of ours) as dispatched. */
export async function markDispatched(db: Db, table: string, ids: number[]): Promise<void> {
  let statement = statements.get(table);
  if (!statement) {
    if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`outbox table ${table}: not a plain table name`);
    statement = sql<{ ids: number[] }>(`update ${table} set dispatched_at = now() where id = any(:ids::bigint[])`);
    statements.set(table, statement);
  }
  await statement.run(db, { ids });
}
