import type { Knex } from '@mikro-orm/postgresql';

export interface PgConnection {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}
interface PoolClient {
  acquireConnection(): Promise<PgConnection>;
  releaseConnection(connection: PgConnection): Promise<void>;
}

/**
 * A named server-side prepared statement, for the few statements on the hot paths of the worker
 * protocol (claim, progress, completion, lease renewal). Knex sends every statement unprepared, so
 * PostgreSQL parses and plans it each time: for the claim and completion statements (data-modifying
 * CTEs) planning took about as long as executing. node-postgres prepares a named statement once per
 * connection and then sends only its parameters; the pool's connections use generic plans for
 * prepared statements (plan_cache_mode, see db/orm.ts), so they are planned once per connection.
 *
 * The SQL uses knex-style `:name` placeholders (`::type` casts are left alone), bound from an object.
 */
export class PreparedStatement<Row> {
  private readonly text: string;
  private readonly params: string[] = [];

  constructor(
    readonly name: string,
    sql: string,
  ) {
    const index = new Map<string, number>();
    this.text = sql.replace(/(?<![:\w]):([a-zA-Z_]\w*)/g, (_, key: string) => {
      let i = index.get(key);
      if (i === undefined) {
        this.params.push(key);
        index.set(key, (i = this.params.length));
      }
      return `$${i}`;
    });
  }

  async run(knex: Knex, bindings: Record<string, unknown>): Promise<Row[]> {
    return withConnection(knex, (connection) => this.runOn(connection, bindings));
  }

  /** Runs on a connection the caller holds (inside inTransaction). */
  async runOn(connection: PgConnection, bindings: Record<string, unknown>): Promise<Row[]> {
    const values = this.params.map((key) => {
      if (!(key in bindings)) throw new Error(`prepared statement ${this.name}: no value for :${key}`);
      return bindings[key];
    });
    return (await connection.query({ name: this.name, text: this.text, values })).rows as Row[];
  }
}

async function withConnection<T>(knex: Knex, fn: (connection: PgConnection) => Promise<T>): Promise<T> {
  const pool = knex.client as unknown as PoolClient;
  const connection = await pool.acquireConnection();
  try {
    return await fn(connection);
  } finally {
    await pool.releaseConnection(connection);
  }
}

/** One transaction on one pooled connection, for prepared statements that must run together. */
export function inTransaction<T>(knex: Knex, fn: (connection: PgConnection) => Promise<T>): Promise<T> {
  return withConnection(knex, async (connection) => {
    await connection.query({ name: '', text: 'begin', values: [] });
    try {
      const result = await fn(connection);
      await connection.query({ name: '', text: 'commit', values: [] });
      return result;
    } catch (err) {
      await connection.query({ name: '', text: 'rollback', values: [] }).catch(() => undefined);
      throw err;
    }
  });
}
