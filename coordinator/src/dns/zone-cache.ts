/**
 * Row-based zone cache in PostgreSQL: one row per record plus per-zone state (SOA serial, time).
 * A refresh asks the master for the SOA serial first and transfers the zone only when the serial
 * differs from the cached one (so changes made outside the API, e.g. by nsupdate, are noticed);
 * writes through the API replace only the rows of the name/type pairs they touched.
 */
import { createHash } from 'node:crypto';
import { finished } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import { isIPv4, isIPv6 } from 'node:net';
import type { Knex } from '@mikro-orm/postgresql';
import { escapeLike } from '../db/like.js';
import { AppError } from '../http/errors.js';
import { DnsError, DnsMasterClient, normalizeName, readZoneFile, recordsAt, type DnsRecord, type QueryResult } from './wire/index.js';
import { CACHE_COPY_COLUMNS, CacheRowWriter } from './cache-rows.js';
import { masterUnavailable } from './master-errors.js';
import { cacheEmptied, loadKey, partitionOf, type ZoneRow } from './zone-registry.js';

export interface CacheState {
  serial: number;
  recordCount: number;
  cachedAt: Date;
  /** Changes whenever the zone's cached rows change (migration 0020): what page anchors are valid for. */
  generation: string;
}

/** Where a refresh's transfer puts the zone's records: as records, or as a transfer message's parsed records. */
export interface TransferRows {
  records(records: DnsRecord[]): void;
  /** The first `count` records of a transfer message's RecordTable fields (wire/message.ts). */
  wire(msg: Buffer, records: Uint32Array, count: number): void;
}

/** The ordering key of a cached row (the columns of index dns_record_cache_order after zone_id). */
type RowKey = [sortKey: string, typeRank: number, type: string, rdata: string, id: string];

/** Every ANCHOR_STEP-th row's key is kept per zone and generation: a deep page walks at most this many index entries. */
const ANCHOR_STEP = 1000;
/** Zones whose anchors a coordinator keeps (the most recently used). */
const ANCHOR_ZONES = 64;
const ORDER = 'sort_key, type_rank, type, rdata, id';
/** The columns of dns_record_cache as migration 0022 makes them (a partition must have exactly these). */
const CACHE_COLUMNS = `id bigint not null default nextval('dns_record_cache_id_seq'), zone_id integer not null, sort_key text collate "C" not null,
  type_rank smallint not null, name text not null, type varchar(16) not null, class varchar(8) not null default 'IN', ttl integer not null,
  rdata text collate "C" not null`;

export interface Page {
  rows: DnsRecord[];
  recordCount: number;
  page: number;
  perPage: number;
  hasMore: boolean;
}

/**
 * Owner labels reversed: canonical DNS order with the apex first. Its own inverse: the sort key of
 * a sort key is the name. (A loop, not split/reverse/join: a refresh computes 100,000 of them.)
 */
export function sortKey(name: string): string {
  const n = normalizeName(name);
  let end = n.length;
  let out = '';
  for (let i = end - 1; i >= 0; i--) {
    if (n.charCodeAt(i) !== 46) continue;
    out += `${n.slice(i + 1, end)}.`;
    end = i;
  }
  return out + n.slice(0, end);
}
export const typeRank = (type: string) => (type === 'SOA' ? 0 : type === 'NS' ? 1 : 2);

export function compareRecords(a: DnsRecord, b: DnsRecord): number {
  const k = (r: DnsRecord) => [sortKey(r.name), typeRank(r.type), r.type, r.rdata] as const;
  const x = k(a);
  const y = k(b);
  for (let i = 0; i < x.length; i++) {
    if (x[i]! < y[i]!) return -1;
    if (x[i]! > y[i]!) return 1;
  }
  return 0;
}

/** Hash of the visible rows plus the paging state: changes exactly when the rendered page would. */
export function displaySignature(p: Page): string {
  const h = createHash('sha256');
  h.update(JSON.stringify([p.page, p.perPage, p.recordCount, p.hasMore]));
  for (const r of p.rows) h.update(`\n${r.name}\t${r.ttl}\t${r.class}\t${r.type}\t${r.rdata}`);
  return h.digest('hex');
}

export type SearchMode = 'ip' | 'type' | 'name' | 'data';

const TYPES = new Set(['A', 'AAAA', 'CNAME', 'NS', 'TXT', 'MX', 'SRV', 'CAA', 'PTR', 'SOA', 'DNAME', 'SPF']);

/** Detects what `q` is: an address (or address prefix), a record type, a name fragment, or record data. `mode:` prefixes force one. */
export function detectSearch(q: string): { mode: SearchMode; term: string } {
  const t = q.trim();
  const forced = /^(ip|type|name|data):(.*)$/i.exec(t);
  if (forced) return { mode: forced[1]!.toLowerCase() as SearchMode, term: forced[2]!.trim() };
  // Addresses and address prefixes: `10.1`, `10.1.2.`, `2001:db8`, `2001:db8::`, `fe80:`.
  if (isIPv4(t) || isIPv6(t) || /^\d{1,3}(\.\d{1,3}){1,2}\.?$/.test(t) || /^[0-9a-f]{1,4}(:[0-9a-f]{0,4}){1,7}:?$/i.test(t))
    return { mode: 'ip', term: t.toLowerCase() };
  if (TYPES.has(t.toUpperCase()) && /^[A-Za-z]+$/.test(t)) return { mode: 'type', term: t.toUpperCase() };
  if (/^[A-Za-z0-9_*.-]+$/.test(t)) return { mode: 'name', term: normalizeName(t) || t.toLowerCase() };
  return { mode: 'data', term: t };
}

export class ZoneCache {
  constructor(
    private readonly knex: () => Knex,
    private readonly timeoutMs: number,
  ) {}

  /** Per zone: the generation the anchors were read at and the keys of rows ANCHOR_STEP-1, 2·ANCHOR_STEP-1, … */
  private readonly anchors = new Map<number, { generation: string; keys: Promise<RowKey[]> }>();

  async client(z: ZoneRow): Promise<DnsMasterClient> {
    return new DnsMasterClient({ server: z.server, port: z.port, key: await loadKey(z), timeoutMs: this.timeoutMs });
  }

  async state(zoneId: number): Promise<CacheState | null> {
    const res = await this.knex().raw<{ rows: Array<{ serial: string; record_count: number; cached_at: Date; generation: string; emptied: boolean }> }>(
      `select serial, record_count, cached_at, generation, ${cacheEmptied('s')} as emptied from dns_zone_cache_state s where zone_id = ?`,
      [zoneId],
    );
    const r = res.rows[0];
    return r && !r.emptied
      ? { serial: Number(r.serial), recordCount: Number(r.record_count), cachedAt: new Date(r.cached_at), generation: String(r.generation) }
      : null;
  }

  /**
   * The refresh path (`/axfr`, `method=axfr`, and a cache miss): SOA serial first; a transfer only
   * when it differs from the cached serial (or `force`). Returns whether rows were replaced.
   */
  async refresh(z: ZoneRow, opts: { force?: boolean } = {}): Promise<{ transferred: boolean; serial: number }> {
    const client = await this.client(z);
    const current = await this.state(z.id);
    if (current && !opts.force) {
      const serial = await client.soaSerial(z.zone).catch((e: unknown) => upstream(e, z));
      if (serial === current.serial) {
        await this.knex().raw(`update dns_zone_cache_state set cached_at = now() where zone_id = ?`, [z.id]);
        return { transferred: false, serial };
      }
    }
    const serial = await this.replaceByTransfer(z.id, (rows) => client.axfrWire(z.zone, (msg, records, count) => rows.wire(msg, records, count))).catch(
      (e: unknown) => (e instanceof DnsError ? upstream(e, z) : Promise.reject(e as Error)),
    );
    return { transferred: true, serial };
  }

  /**
   * A full replace fed by a running zone transfer, in one transaction on one connection: the
   * transferred records are streamed into PostgreSQL's COPY (pg-copy-streams) while the transfer
   * goes on, into a new unlogged table created in the same transaction (so COPY FREEZE writes the
   * rows already visible to everyone and index-only scans work at once; migration 0022 says why
   * unlogged), with its one index. The table then replaces the zone's partition of
   * dns_record_cache (migration 0022): the old partition is dropped and the new one attached, which holds the
   * parent's lock only for those last statements. A failed transfer rolls everything back. Takes
   * the zone row lock first, as the write sync does, so writes wait for the swap.
   */
  async replaceByTransfer(zoneId: number, transfer: (rows: TransferRows) => Promise<{ serial: number }>): Promise<number> {
    const knex = this.knex();
    // The raw pg connection (knex's client is untyped): COPY needs the connection itself, not a query builder.
    const pool = knex.client as { acquireConnection(): Promise<PgClient>; releaseConnection(c: PgClient): Promise<unknown> };
    const conn = await pool.acquireConnection();
    const id = Math.trunc(zoneId);
    const part = partitionOf(id);
    const load = `dns_record_cache_load_${id}`;
    try {
      // One round trip (the simple query protocol takes several statements; every value here is
      // an integer of ours).
      await conn.query(
        [
          'begin',
          // Derived data: a commit lost in a crash loses nothing the next transfer does not bring back.
          'set local synchronous_commit to off',
          `select z.id from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id where z.id = ${id} for update of z`,
          // Its columns spelled out, not LIKE dns_record_cache: LIKE would hold a share lock on
          // the parent until commit, and two refreshes each holding one while asking for the
          // exclusive lock of the swap deadlock.
          `create unlogged table ${load} (${CACHE_COLUMNS})`,
          // The partition bound as a constraint: ATTACH PARTITION then skips its scan of the rows.
          `alter table ${load} add constraint ${load}_zone check (zone_id = ${id})`,
          // The index exists before the rows come: a transfer sends names in canonical DNS order,
          // which is this index's order (only one name's records may come in another order, onto
          // the same page), so each row is added at the right edge of the tree while the transfer
          // goes on, instead of sorting everything after it.
          `create index ${load}_order on ${load} (${ORDER}) include (zone_id, ttl, class)`,
        ].join(';\n'),
      );
      const copy = conn.query(copyFrom(`copy ${load} (${CACHE_COPY_COLUMNS}) from stdin with (freeze)`));
      const done = finished(copy);
      const writer = new CacheRowWriter(id);
      let result: { serial: number };
      // The transfer's messages carry about a hundred records each: rows go to COPY in chunks of
      // about 256 KiB instead (a write per message cost more than the rows).
      const flush = (atLeast: number) => {
        if (writer.size >= atLeast) copy.write(writer.take());
      };
      try {
        result = await transfer({
          records(records) {
            for (const r of records) writer.record(r);
            flush(262_144);
          },
          wire(msg, records, count) {
            for (let i = 0; i < count; i++) writer.wire(msg, records, i);
            flush(262_144);
          },
        });
        flush(1);
      } catch (err) {
        copy.destroy();
        await done.catch(() => undefined);
        throw err;
      }
      copy.end();
      await done;
      const serial = result.serial >>> 0;
      // Again one round trip, ending in the commit.
      await conn.query(
        [
          // Planner statistics for the new rows before anyone reads them (an index made on the
          // empty table left it counted as empty, and a page would be planned as a scan and sort
          // of the whole zone). A small sample of the sort key is enough, and takes milliseconds.
          'set local default_statistics_target = 10',
          `analyze ${load} (sort_key)`,
          `drop table if exists ${part}`,
          `alter table ${load} rename to ${part}`,
          `alter index ${load}_order rename to ${part}_order`,
          `alter table ${part} rename constraint ${load}_zone to ${part}_zone`,
          `alter table dns_record_cache attach partition ${part} for values in (${id})`,
          `insert into dns_zone_cache_state (zone_id, serial, record_count, cached_at) values (${id}, ${serial}, ${writer.rows}, now())
           on conflict (zone_id) do update set serial = excluded.serial, record_count = excluded.record_count, cached_at = excluded.cached_at,
             generation = nextval('dns_cache_generation_seq')`,
          'commit',
        ].join(';\n'),
      );
      return serial;
    } catch (err) {
      await conn.query('rollback').catch(() => undefined);
      throw err;
    } finally {
      await pool.releaseConnection(conn);
    }
  }

  /**
   * After a write: the rows of each touched name/type pair become the master's current answer for
   * that pair; nothing else changes. Runs with the zone row locked (FOR UPDATE, the lock a full
   * replace takes too) and asks the master inside it, so concurrent writers apply their answers
   * one after another and a later writer never sees an older answer. `record_count` moves by the
   * rows deleted and inserted (no recount, which each READ COMMITTED writer would do on its own
   * snapshot). `serial` and the SOA row advance together, and only when the master's serial moved
   * by exactly our one update from the cached serial (otherwise someone else also changed the zone,
   * and the next refresh transfers it).
   *
   * Never fails the write it follows: when the master or the database cannot be asked, the cache
   * is marked stale so that the next read transfers the zone again.
   *
   * `alsoAsk`: further questions put to the master in the same pipelined exchange (the write's
   * read-back); their answers are returned in order, or null when the master was not asked (no
   * cache for the zone, or a failure), and the caller asks on its own.
   */
  async syncAfterWrite(
    z: ZoneRow,
    client: DnsMasterClient,
    pairs: Array<{ name: string; type: string }>,
    serialBefore: number | null,
    alsoAsk: Array<{ name: string; type: string }> = [],
  ): Promise<QueryResult[] | null> {
    try {
      return await this.syncPairs(z, client, pairs, serialBefore, alsoAsk);
    } catch {
      await this.markStale(z.id);
      return null;
    }
  }

  private async syncPairs(
    z: ZoneRow,
    client: DnsMasterClient,
    pairs: Array<{ name: string; type: string }>,
    serialBefore: number | null,
    alsoAsk: Array<{ name: string; type: string }> = [],
  ): Promise<QueryResult[] | null> {
    const unique = [...new Map(pairs.map((p) => [`${normalizeName(p.name)}|${p.type}`, { name: normalizeName(p.name), type: p.type }])).values()];
    return this.knex().transaction(async (trx) => {
      const locked = await trx.raw<{ rows: Array<{ serial: string | null; emptied: boolean | null }> }>(
        `select s.serial, ${cacheEmptied('s')} as emptied from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id where z.id = ? for update of z`,
        [z.id],
      );
      const cached = locked.rows[0]?.serial;
      if (cached === null || cached === undefined || locked.rows[0]?.emptied) return null;
      // One exchange for the pairs, the SOA and the extra questions, each distinct question once.
      const questions = new Map<string, { name: string; type: string }>();
      for (const q of [...unique, { name: z.zone, type: 'SOA' }, ...alsoAsk]) questions.set(`${normalizeName(q.name)}|${q.type}`, q);
      const keys = [...questions.keys()];
      const got = await client.queryMany([...questions.values()]);
      const byKey = new Map(keys.map((k, i) => [k, got[i]!]));
      const answerOf = (q: { name: string; type: string }) => byKey.get(`${normalizeName(q.name)}|${q.type}`)!;
      const answers = [...unique, { name: z.zone, type: 'SOA' }].map(answerOf);
      const rows = unique.flatMap((p, i) => recordsAt(answers[i]!, p.name, p.type));
      const soa = answers[unique.length]!.answers.find((r) => r.name === z.zone && r.type === 'SOA');
      const serialAfter = soa ? soaSerialOf(soa.rdata) : null;
      const advance = serialBefore !== null && serialAfter !== null && Number(cached) === serialBefore && serialAfter === (serialBefore + 1) >>> 0;
      const replaced = unique.map((p) => ({ n: p.name, t: p.type }));
      if (advance && soa) {
        replaced.push({ n: z.zone, t: 'SOA' });
        rows.push(soa);
      }
      const deleted = await deletePairs(trx, z.id, replaced);
      await insertRows(trx, z.id, rows);
      const delta = rows.length - (deleted.rowCount ?? 0);
      await trx.raw(
        `update dns_zone_cache_state set record_count = record_count + ?, generation = nextval('dns_cache_generation_seq')${advance ? ', serial = ?' : ''} where zone_id = ?`,
        advance ? [delta, serialAfter, z.id] : [delta, z.id],
      );
      return alsoAsk.map(answerOf);
    });
  }

  /**
   * A provider zone's write: the rows of the touched name/type pairs become `rows` (the provider's
   * read-back), under the same zone row lock and with the same exact count arithmetic as
   * syncPairs. Never fails the write it follows: on an error the cache is marked stale.
   */
  async replacePairs(zoneId: number, pairs: Array<{ name: string; type: string }>, rows: DnsRecord[]): Promise<void> {
    const keys = [...new Map(pairs.map((p) => [`${normalizeName(p.name)}|${p.type}`, { n: normalizeName(p.name), t: p.type }])).values()];
    try {
      await this.knex().transaction(async (trx) => {
        const locked = await trx.raw<{ rows: Array<{ serial: string | null; emptied: boolean | null }> }>(
          `select s.serial, ${cacheEmptied('s')} as emptied from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id where z.id = ? for update of z`,
          [zoneId],
        );
        if (locked.rows[0]?.serial === null || locked.rows[0]?.serial === undefined || locked.rows[0]?.emptied) return;
        const deleted = await deletePairs(trx, zoneId, keys);
        await insertRows(trx, zoneId, rows);
        // Rows changed: a new generation (keyset paging anchors of the old one are not used again).
        await trx.raw(`update dns_zone_cache_state set record_count = record_count + ?, generation = nextval('dns_cache_generation_seq') where zone_id = ?`, [
          rows.length - (deleted.rowCount ?? 0),
          zoneId,
        ]);
      });
    } catch {
      await this.markStale(zoneId);
    }
  }

  /** The next read transfers (or fetches) the zone again. */
  async markStale(zoneId: number): Promise<void> {
    await this.knex()
      .raw(`update dns_zone_cache_state set cached_at = to_timestamp(0) where zone_id = ?`, [zoneId])
      .catch(() => undefined);
  }

  async clear(zoneId: number): Promise<void> {
    await this.knex().transaction(async (trx) => {
      await trx.raw(`drop table if exists ${partitionOf(zoneId)}`);
      await trx.raw(`delete from dns_zone_cache_state where zone_id = ?`, [zoneId]);
      await trx.raw(`update dns_zones set last_invalidated_at = now() where id = ?`, [zoneId]);
    });
  }

  /**
   * One page in cache order. The documented contract is page numbers, so deep pages are found by
   * keyset from the nearest anchor (the key of every 1,000th row, kept per zone and cache
   * generation) plus an OFFSET of less than 1,000 index entries: page 1,000 of a 100,000-row zone
   * costs what page 10 does. Anchors are read once per generation (one index-only scan) and only
   * when a page beyond the first anchor is asked for. `record_count` comes from the cache state (no count).
   */
  async page(zoneId: number, state: CacheState, page: number, perPage: number): Promise<Page> {
    const recordCount = state.recordCount;
    const offset = (page - 1) * perPage;
    let after: RowKey | null = null;
    let skip = offset;
    if (offset >= ANCHOR_STEP && offset < recordCount) {
      const keys = await this.anchorKeys(zoneId, state.generation);
      const i = Math.min(Math.floor(offset / ANCHOR_STEP), keys.length) - 1;
      if (i >= 0) {
        after = keys[i]!;
        skip = offset - (i + 1) * ANCHOR_STEP;
      }
    }
    const res = await this.knex().raw<{ rows: Array<Omit<DnsRecord, 'name'> & { sort_key: string }> }>(
      // One index-only scan of the zone's partition from the anchor on: the index includes every
      // column shown, the name as its sort key (the same labels in reverse order).
      `select sort_key, ttl, class, type, rdata from dns_record_cache where zone_id = ?${after ? ` and (${ORDER}) > (?, ?, ?, ?, ?)` : ''}
        order by ${ORDER} limit ? offset ?`,
      [zoneId, ...(after ?? []), perPage, skip],
    );
    const rows = res.rows.map((r) => ({ name: sortKey(r.sort_key), ttl: Number(r.ttl), class: r.class, type: r.type, rdata: r.rdata }));
    return { rows, recordCount, page, perPage, hasMore: page * perPage < recordCount };
  }

  private anchorKeys(zoneId: number, generation: string): Promise<RowKey[]> {
    const held = this.anchors.get(zoneId);
    if (held?.generation === generation) {
      // Most recently used last (a Map keeps insertion order).
      this.anchors.delete(zoneId);
      this.anchors.set(zoneId, held);
      return held.keys;
    }
    const keys = this.knex()
      .raw<{ rows: Array<{ sort_key: string; type_rank: number; type: string; rdata: string; id: string }> }>(
        `select ${ORDER} from (select ${ORDER}, row_number() over (order by ${ORDER}) as n from dns_record_cache where zone_id = ?) r
          where n % ? = 0 order by n`,
        [zoneId, ANCHOR_STEP],
      )
      .then((res) => res.rows.map((r): RowKey => [r.sort_key, Number(r.type_rank), r.type, r.rdata, String(r.id)]));
    // A failed read is not kept: the next page read tries again.
    keys.catch(() => {
      if (this.anchors.get(zoneId)?.keys === keys) this.anchors.delete(zoneId);
    });
    this.anchors.delete(zoneId);
    this.anchors.set(zoneId, { generation, keys });
    while (this.anchors.size > ANCHOR_ZONES) this.anchors.delete(this.anchors.keys().next().value!);
    return keys;
  }

  async search(zoneId: number, mode: SearchMode, term: string, page: number, perPage: number): Promise<Page> {
    let where: string;
    let binds: unknown[];
    const like = `%${escapeLike(term)}%`;
    switch (mode) {
      case 'ip':
        where = `(type in ('A','AAAA') and (rdata = ? or rdata like ?)) or (type = 'PTR' and name like ?)`;
        binds = [term, `${escapeLike(term)}%`, like];
        break;
      case 'type':
        where = `type = ?`;
        binds = [term];
        break;
      case 'name':
        // A bare word may be a name fragment or a word of record data (`spf1` in an apex `v=spf1` TXT): both match.
        where = `name like ? or rdata ilike ?`;
        binds = [like, `%${escapeLike(term)}%`];
        break;
      default:
        where = `rdata ilike ?`;
        binds = [like];
    }
    const res = await this.knex().raw<{ rows: Array<DnsRecord & { total: string }> }>(
      `select name, ttl, class, type, rdata, count(*) over () as total from dns_record_cache where zone_id = ? and (${where})
       order by sort_key, type_rank, type, rdata, id limit ? offset ?`,
      [zoneId, ...binds, perPage, (page - 1) * perPage],
    );
    const rows = res.rows;
    let total = rows[0] ? Number(rows[0].total) : 0;
    if (!rows.length && page > 1) {
      const c = await this.knex().raw<{ rows: Array<{ n: string }> }>(`select count(*) as n from dns_record_cache where zone_id = ? and (${where})`, [
        zoneId,
        ...binds,
      ]);
      total = Number(c.rows[0]!.n);
    }
    const out = rows.map(({ total: _t, ...r }) => ({ ...r, ttl: Number(r.ttl) }));
    return { rows: out, recordCount: total, page, perPage, hasMore: page * perPage < total };
  }

  /** `method=file`: the zone file (with its journal applied) in cache order. */
  async fromFile(z: ZoneRow, page: number, perPage: number): Promise<Page> {
    if (z.filePath === null) throw new AppError('required_paths_missing_or_unreadable', `zone ${z.zone} has no zone file here (a provider zone)`);
    const all = (await readZoneFile(z.zone, z.filePath, { journal: true }).catch((e: unknown) => upstream(e, z))).sort(compareRecords);
    const rows = all.slice((page - 1) * perPage, page * perPage);
    return { rows, recordCount: all.length, page, perPage, hasMore: page * perPage < all.length };
  }
}

interface PgClient {
  query(text: string, values?: unknown[]): Promise<unknown>;
  query<T extends NodeJS.WritableStream>(stream: T): T;
}

/**
 * Deletes the cached rows of these name/type pairs; returns how many. Found through the ordering
 * index: sort_key is a function of the name.
 */
async function deletePairs(trx: Knex, zoneId: number, keys: Array<{ n: string; t: string }>): Promise<{ rowCount: number | null }> {
  return trx.raw<{ rowCount: number | null }>(
    `delete from dns_record_cache where zone_id = ? and (sort_key, name, type) in (select x.k, x.n, x.t from jsonb_to_recordset(?::jsonb) as x(k text, n text, t text))`,
    [zoneId, JSON.stringify(keys.map((k) => ({ k: sortKey(k.n), n: k.n, t: k.t })))],
  );
}

async function insertRows(trx: Knex, zoneId: number, records: DnsRecord[]) {
  const CHUNK = 5000;
  for (let i = 0; i < records.length; i += CHUNK) {
    const chunk = records.slice(i, i + CHUNK).map((r) => ({ k: sortKey(r.name), y: typeRank(r.type), n: r.name, t: r.type, c: r.class, l: r.ttl, d: r.rdata }));
    await trx.raw(
      `insert into dns_record_cache (zone_id, sort_key, type_rank, name, type, class, ttl, rdata)
       select ?, x.k, x.y, x.n, x.t, x.c, x.l, x.d from jsonb_to_recordset(?::jsonb) as x(k text, y smallint, n text, t text, c text, l integer, d text)`,
      [zoneId, JSON.stringify(chunk)],
    );
  }
}

/** The serial of an SOA row's presentation form (`mname rname serial refresh retry expire minimum`). */
function soaSerialOf(rdata: string): number | null {
  const serial = Number(rdata.trim().split(/\s+/)[2]);
  return Number.isInteger(serial) ? serial : null;
}

/** Master unreachable or refusing: a 503 naming the zone (never a stack). */
function upstream(err: unknown, z: ZoneRow): never {
  throw masterUnavailable(err, `zone ${z.zone}: master ${z.server}:${z.port}`);
}
