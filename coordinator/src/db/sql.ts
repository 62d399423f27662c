import type { Knex } from '@mikro-orm/postgresql';

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

  /** Every row the statement returns. */
  async rows(db: Db, params: Params): Promise<Row[]> {
    const bound = params as Record<string, unknown>;
    const values = this.keys.map((key) => {
      if (!(key in bound)) throw new Error(`SQL statement ${this.prepared ?? ''}: no value for :${key}`);
      return bound[key];
    });
    const result = (await db.raw(this.text).options(this.prepared ? { name: this.prepared, values } : { values })) as { rows: Row[] };
    return result.rows;
  }

  /** The first row, or null when there is none. */
  async first(db: Db, params: Params): Promise<Row | null> {
    return (await this.rows(db, params))[0] ?? null;
  }
}

/** A statement (see Sql); `prepared` names the hot ones. */
export const sql = <Params extends object, Row = Record<string, never>>(text: string, prepared?: string) => new Sql<Params, Row>(text, prepared);
