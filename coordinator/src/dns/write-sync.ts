/** A write's cache sync: the rows of the name/type pairs a write touched become the master's answer. */
import type { Knex } from '@mikro-orm/postgresql';
import { borrowConnection, type Borrowed } from '../db/sql.js';
import { commitPairs, lockForSync, rollbackSync } from './cache-repository.js';
import { normalizeName, recordsAt, type DnsMasterClient, type DnsRecord, type QueryResult } from './wire/index.js';

/**
 * A write's cache sync (ZoneCache.beginSync): after the write, the rows of each touched name/type
 * pair become the master's current answer for that pair; nothing else changes. The master is asked
 * with the zone row locked, so concurrent writers apply their answers one after another and a later
 * writer never sees an older answer. `record_count` moves by the rows deleted and inserted (no
 * recount, which each READ COMMITTED writer would do on its own snapshot). `serial` and the SOA row
 * advance together, and only when the master's serial moved by exactly our one update from the
 * cached serial; any other jump (concurrent writes, or a change made elsewhere) marks the cache
 * stale in the same statement, so reads say so and the next zone read transfers it.
 *
 * Two round trips of PostgreSQL in all, on a borrowed connection (cache-repository.ts has the SQL):
 * `begin` with the lock (sent at once, while the caller's UPDATE is under way), then the change
 * with its commit.
 * Never fails the write it follows: when the master or the database cannot be asked, the cache is
 * marked stale so that the next read transfers the zone again.
 */
export class WriteSync {
  /** The locked connection with the cached serial; null when the zone has no usable cache (nothing to sync). */
  private readonly held: Promise<{ borrowed: Borrowed; serial: number } | null>;
  private closed = false;

  constructor(
    private readonly knex: Knex,
    private readonly zoneId: number,
    private readonly markStale: () => Promise<void>,
  ) {
    this.held = this.lock();
    // A failure is handled where the lock is awaited; this keeps it from counting as unhandled meanwhile.
    this.held.catch(() => undefined);
  }

  private async lock() {
    const borrowed = await borrowConnection(this.knex);
    try {
      const serial = await lockForSync(borrowed.conn, this.zoneId);
      if (serial === null) {
        await this.release(borrowed);
        return null;
      }
      return { borrowed, serial };
    } catch (err) {
      await this.release(borrowed);
      throw err;
    }
  }

  /** Ends the transaction without a change and gives the connection back. */
  private async release(borrowed: Borrowed) {
    await rollbackSync(borrowed.conn);
    await borrowed.release();
  }

  /**
   * After the UPDATE: asks the master for the touched pairs, the zone's SOA and `alsoAsk` (the
   * write's read-back) in one pipelined exchange, and replaces the pairs' rows. Returns the answers
   * to `alsoAsk` in order, or null when the master was not asked (no cache for the zone, or a
   * failure), and the caller asks on its own.
   */
  async finish(
    client: DnsMasterClient,
    zone: string,
    pairs: Array<{ name: string; type: string }>,
    serialBefore: number | null,
    alsoAsk: Array<{ name: string; type: string }> = [],
  ): Promise<QueryResult[] | null> {
    return this.run(async (cached) => {
      const unique = [...new Map(pairs.map((p) => [`${normalizeName(p.name)}|${p.type}`, { name: normalizeName(p.name), type: p.type }])).values()];
      // One exchange for the pairs, the SOA and the extra questions, each distinct question once.
      const questions = new Map<string, { name: string; type: string }>();
      for (const q of [...unique, { name: zone, type: 'SOA' }, ...alsoAsk]) questions.set(`${normalizeName(q.name)}|${q.type}`, q);
      const keys = [...questions.keys()];
      const got = await client.queryMany([...questions.values()]);
      const byKey = new Map(keys.map((k, i) => [k, got[i]!]));
      const answerOf = (q: { name: string; type: string }) => byKey.get(`${normalizeName(q.name)}|${q.type}`)!;
      const answers = [...unique, { name: zone, type: 'SOA' }].map(answerOf);
      const rows = unique.flatMap((p, i) => recordsAt(answers[i]!, p.name, p.type));
      const soa = answers[unique.length]!.answers.find((r) => r.name === zone && r.type === 'SOA');
      const serialAfter = soa ? soaSerialOf(soa.rdata) : null;
      const advance = serialBefore !== null && serialAfter !== null && cached === serialBefore && serialAfter === (serialBefore + 1) >>> 0;
      if (advance && soa) {
        unique.push({ name: zone, type: 'SOA' });
        rows.push(soa);
      }
      // Any other jump (writes that ran at the same time, or a change made elsewhere): the rows
      // between the cached serial and the master's are not all known here, so the cache is marked
      // stale; reads then say so (`cache_is_stale`, `from_database_stale`) and a zone read transfers.
      const behind = !advance && serialAfter !== cached;
      return { pairs: unique, rows, serial: advance ? serialAfter : null, stale: behind, result: alsoAsk.map(answerOf) };
    });
  }

  /** The pairs' rows become `rows` (a provider zone's read-back). */
  async replace(pairs: Array<{ name: string; type: string }>, rows: DnsRecord[]): Promise<void> {
    await this.run(async () => ({ pairs, rows, serial: null, stale: false, result: undefined }));
  }

  /** Releases the lock without a change (the write failed); nothing once finished. */
  async cancel(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const held = await this.held.catch(() => null);
    if (held) await this.release(held.borrowed);
  }

  private async run<T>(
    change: (
      cachedSerial: number,
    ) => Promise<{ pairs: Array<{ name: string; type: string }>; rows: DnsRecord[]; serial: number | null; stale: boolean; result: T }>,
  ): Promise<T | null> {
    if (this.closed) throw new Error('WriteSync used twice');
    this.closed = true;
    let held;
    try {
      held = await this.held;
    } catch {
      await this.markStale();
      return null;
    }
    if (!held) return null;
    let done: { result: T } | null = null;
    try {
      const c = await change(held.serial);
      await commitPairs(held.borrowed.conn, this.zoneId, c);
      done = { result: c.result };
    } catch {
      await rollbackSync(held.borrowed.conn);
    } finally {
      await held.borrowed.release();
    }
    if (done) return done.result;
    await this.markStale();
    return null;
  }
}

/** The serial of an SOA row's presentation form (`mname rname serial refresh retry expire minimum`). */
function soaSerialOf(rdata: string): number | null {
  const serial = Number(rdata.trim().split(/\s+/)[2]);
  return Number.isInteger(serial) ? serial : null;
}
