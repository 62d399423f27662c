/**
 * The zone cache's full replace (ZoneCache.refresh): a zone transfer streamed through COPY into a
 * new partition of dns_record_cache, made with its DDL on a borrowed connection, which then takes
 * the place of the zone's partition (migration 0022).
 */
import { finished } from 'node:stream/promises';
import type { Knex } from '@mikro-orm/postgresql';
import { from as copyFrom } from 'pg-copy-streams';
import { borrowConnection } from '../db/sql.js';
import { CACHE_COPY_COLUMNS, CacheRowWriter } from './cache-rows.js';
import { ORDER, STATE_COLUMNS, stateOf, type CacheState, type StateRow } from './cache-repository.js';
import type { DnsRecord } from './wire/index.js';
import { detachedPartitionOf, partitionOf } from './zone-repository.js';

/** Where a refresh's transfer puts the zone's records: as records, or as a transfer message's parsed records. */
export interface TransferRows {
  records(records: DnsRecord[]): void;
  /** The first `count` records of a transfer message's RecordTable fields (wire/message.ts). */
  wire(msg: Buffer, records: Uint32Array, count: number): void;
}

/** The columns of dns_record_cache as migration 0022 makes them (a partition must have exactly these). */
const CACHE_COLUMNS = `id bigint not null default nextval('dns_record_cache_id_seq'), zone_id integer not null, sort_key text collate "C" not null,
  type_rank smallint not null, name text not null, type varchar(16) not null, class varchar(8) not null default 'IN', ttl integer not null,
  rdata text collate "C" not null`;

/**
 * A full replace fed by a running zone transfer, in one transaction on one connection: the
 * transferred records are streamed into PostgreSQL's COPY (pg-copy-streams) while the transfer
 * goes on, into a new unlogged table created in the same transaction (so COPY FREEZE writes the
 * rows already visible to everyone and index-only scans work at once; migration 0022 says why
 * unlogged), with its one index. The table then replaces the zone's partition of
 * dns_record_cache (migration 0022): the old partition is detached (and dropped after the commit)
 * and the new one attached, which holds the parent's lock only for those last statements. A
 * failed transfer rolls everything back. Takes the zone row lock first, as the write sync does, so
 * writes wait for the swap. Returns the cache state it wrote; the caller drops the detached
 * partition after (dropDetachedPartition in cache-repository.ts).
 */
export async function loadByTransfer(knex: Knex, zoneId: number, transfer: (rows: TransferRows) => Promise<{ serial: number }>): Promise<CacheState> {
  const borrowed = await borrowConnection(knex);
  const conn = borrowed.conn;
  const id = Math.trunc(zoneId);
  const part = partitionOf(id);
  const detached = detachedPartitionOf(id);
  const load = `dns_record_cache_load_${id}`;
  try {
    // The simple query protocol takes several statements in one round trip (every value here is
    // an integer of ours). First the zone row lock, awaited: a write holding it (WriteSync)
    // finishes before the transfer starts, so nothing piles up in memory meanwhile.
    await conn.query(
      [
        'begin',
        // Derived data: a commit lost in a crash loses nothing the next transfer does not bring back.
        'set local synchronous_commit to off',
        `select z.id from dns_zones z left join dns_zone_cache_state s on s.zone_id = z.id where z.id = ${id} for update of z`,
      ].join(';\n'),
    );
    // Then the load table, sent together with the COPY while the transfer starts: its first rows
    // wait in the COPY stream until PostgreSQL is ready for them.
    const prologue = conn.query(
      [
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
    // A failed prologue (its error is the cause) or COPY stops the transfer at its next message.
    let failure: unknown = null;
    prologue.catch((e: unknown) => (failure = e));
    done.catch((e: unknown) => (failure ??= e));
    const writer = new CacheRowWriter(id);
    let result: { serial: number };
    // The transfer's messages carry about a hundred records each: rows go to COPY in chunks of
    // about 256 KiB instead (a write per message cost more than the rows).
    const flush = (atLeast: number) => {
      if (failure) throw failure as Error;
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
      await prologue;
    } catch (err) {
      copy.destroy();
      await done.catch(() => undefined);
      // The prologue's own error, when it failed, says more than the aborted COPY's.
      await prologue;
      throw err;
    }
    copy.end();
    await done;
    const serial = result.serial >>> 0;
    // Again one round trip, ending in the commit; the cache state it writes comes back.
    const ended = await conn.query<Array<{ command: string; rows: StateRow[] }>>(
      [
        // Planner statistics for the new rows before anyone reads them (an index made on the
        // empty table left it counted as empty, and a page would be planned as a scan and sort
        // of the whole zone: 25 ms instead of 1). What the plan needs is the row count, so the
        // smallest sample does (300 rows: 1.6 ms for 100,000 rows, 7 ms at target 10).
        'set local default_statistics_target = 1',
        `analyze ${load} (sort_key)`,
        // The zone's partition is detached and kept under another name, and dropped after the
        // commit (dropDetached): dropping it here put the truncation of its files (6 ms for
        // 100,000 rows) into the commit, before the answer. A detached table an earlier refresh
        // did not get to drop goes first.
        `drop table if exists ${detached}`,
        // The parent's lock is taken before the partition's: DETACH needs ACCESS EXCLUSIVE on the
        // parent anyway, and a reader locks the parent first, then the partitions; renaming the
        // partition first (its lock) and then detaching (the parent's) deadlocked with a reader
        // that held the parent and waited for the partition.
        `do $$ declare idx text; begin
           if to_regclass('${part}') is not null then
             lock table dns_record_cache in access exclusive mode;
             select indexrelid::regclass::text into idx from pg_index where indrelid = '${part}'::regclass limit 1;
             alter table ${part} rename to ${detached};
             if idx is not null then execute format('alter index %s rename to %I', idx, '${detached}_order'); end if;
             alter table dns_record_cache detach partition ${detached};
           end if;
         end $$`,
        `alter table ${load} rename to ${part}`,
        `alter index ${load}_order rename to ${part}_order`,
        `alter table ${part} rename constraint ${load}_zone to ${part}_zone`,
        `alter table dns_record_cache attach partition ${part} for values in (${id})`,
        `insert into dns_zone_cache_state (zone_id, serial, record_count, cached_at) values (${id}, ${serial}, ${writer.rows}, now())
         on conflict (zone_id) do update set serial = excluded.serial, record_count = excluded.record_count, cached_at = excluded.cached_at,
           generation = nextval('dns_cache_generation_seq')
         returning ${STATE_COLUMNS}`,
        'commit',
      ].join(';\n'),
    );
    return stateOf(ended.find((r) => r.command === 'INSERT')!.rows[0]!);
  } catch (err) {
    await conn.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    await borrowed.release();
  }
}
