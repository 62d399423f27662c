import type { Knex } from '@mikro-orm/postgresql';
import pg from 'pg';

/** Where a statement runs: the pool (MikroORM's knex) or a transaction opened on it. */
export type Db = Knex | Knex.Transaction;

/**
 * One hand-written SQL statement with its parameters and its row type, declared once where the
 * statement is defined: the one typed way to PostgreSQL for SQL that MikroORM's entities do not
 * express (data-modifying CTEs, batches through unnest, row-level guards). The statement's SQL
 * casts its result columns to the JavaScript types of `Row` (`::int`, `::float8`, epoch
 * milliseconds instead of timestamps), so rows need no conversion after the query.
 *
 * The SQL uses `:name` placeholders (`::type` casts are left alone), bound from a `Params` object;
 * a missing value is an error before anything is sent. A statement with a `prepared` name is a
 * named server-side prepared statement (node-postgres prepares it once per connection and then
 * sends only its parameters; the pool plans it once, see plan_cache_mode in db/orm.ts): for the
 * worker protocol's hot paths, where planning a data-modifying CTE took about as long as running
 * it. The placeholders become `$n` once, here; each run hands node-postgres its query config
 * (name and values) through knex's public `raw(...).options()`, which the pg dialect mixes into the
 * query it sends, so knex neither rescans the text for bindings nor needs its client's internals.
 */
export class Sql<Params extends object, Row> {
  private readonly text: string;
  private readonly keys: string[] = [];

  constructor(
    sql: string,
    /** The name of the server-side prepared statement; unnamed statements are parsed each time. */
    readonly prepared?: string,
  ) {
    // knex turns `?` into a placeholder of its own
    if (sql.includes('?')) throw new Error(`SQL statement ${prepared ?? ''}: no '?' (knex reads it as a placeholder)`);
    // each occurrence is a parameter of its own, so PostgreSQL infers its type from where it stands
    this.text = sql.replace(/(?<![:\w]):([a-zA-Z_]\w*)/g, (_, key: string) => `$${this.keys.push(key)}`);
  }

  private values(params: Params): unknown[] {
    const bound = params as Record<string, unknown>;
    return this.keys.map((key) => {
      if (!(key in bound)) throw new Error(`SQL statement ${this.prepared ?? ''}: no value for :${key}`);
      return bound[key];
    });
  }

  /**
   * Every row the statement returns. `query` adds node-postgres query options (LONG_STATEMENT of
   * db/orm.ts for a statement that may run long).
   */
  async rows(db: Db, params: Params, query: object = {}): Promise<Row[]> {
    return ((await this.send(db, params, query)) as { rows: Row[] }).rows;
  }

  /** Runs the statement for its effect: the number of rows it inserted, updated or deleted. */
  async run(db: Db, params: Params, query: object = {}): Promise<number> {
    return ((await this.send(db, params, query)) as { rowCount: number | null }).rowCount ?? 0;
  }

  private async send(db: Db, params: Params, query: object): Promise<unknown> {
    const values = this.values(params);
    return db.raw(this.text).options({ ...query, ...(this.prepared ? { name: this.prepared, values } : { values }) });
  }

  /** The first row, or null when there is none. */
  async first(db: Db, params: Params): Promise<Row | null> {
    return (await this.rows(db, params))[0] ?? null;
  }
}

/** A statement (see Sql); `prepared` names the hot ones. */
export const sql = <Params extends object, Row = Record<string, never>>(text: string, prepared?: string) => new Sql<Params, Row>(text, prepared);

/** Whether the database answers a trivial statement (a health probe); rejects when it does not. */
export const ping = (db: Db): Promise<number> => sql('select 1').run(db, {});

/** The pool behind an entity manager (a repository handed an EntityManager runs its statements there). */
export const dbOf = (em: { getConnection(): { getKnex(): Knex } }): Knex => em.getConnection().getKnex();

/**
 * A pg connection lent by knex's pool, for the work one statement through `Sql` cannot do: COPY
 * (pg-copy-streams), several statements in one simple-protocol round trip, a transaction held
 * across an exchange with another system. knex marks a connection it must destroy instead of
 * lending again (`__knex__disposed`).
 */
export interface PooledConnection {
  query<R = unknown>(text: string, values?: unknown[]): Promise<R>;
  query<T extends NodeJS.WritableStream>(stream: T): T;
  __knex__disposed?: unknown;
}

/** The part of knex's client (typed `any` there) that lends and takes back pooled connections. */
interface ConnectionPool {
  acquireConnection(): Promise<PooledConnection>;
  releaseConnection(conn: PooledConnection): Promise<unknown>;
}

/** A borrowed connection and the one way to give it back (see borrowConnection). */
export interface Borrowed {
  readonly conn: PooledConnection;
  release(): Promise<void>;
}

/**
 * Borrows a connection from the pool of `knex` (the one typed way to knex's untyped client); the
 * caller gives it back with `release()`, once, after ending any transaction it opened. Prefer
 * withConnection; this form is for a connection held across calls (a lock taken before the write it
 * guards).
 */
export async function borrowConnection(knex: Knex): Promise<Borrowed> {
  const pool = knex.client as ConnectionPool;
  const conn = await pool.acquireConnection();
  let released = false;
  return {
    conn,
    async release() {
      if (released) return;
      released = true;
      await pool.releaseConnection(conn);
    },
  };
}

/** Runs `fn` on a connection borrowed from the pool of `knex`, and gives it back after, whatever happens. */
export async function withConnection<T>(knex: Knex, fn: (conn: PooledConnection) => Promise<T>): Promise<T> {
  const borrowed = await borrowConnection(knex);
  try {
    return await fn(borrowed.conn);
  } finally {
    await borrowed.release();
  }
}

/** `value` as a quoted SQL string literal (for simple-protocol text on a borrowed connection, which takes no parameters). */
export const literal = (value: string): string => pg.escapeLiteral(value);
