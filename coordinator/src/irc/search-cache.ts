import { LRUCache } from 'lru-cache';
import type { IrcArchiveChanges } from './archive-changes.js';
import type { LogSearch } from './archive-service.js';

export interface IrcSearchCacheOptions {
  /** Memory bound, as the JSON size of the answers held; 0 turns the cache off. */
  maxBytes: number;
  /** An answer is dropped this long after it was computed (a bound on staleness should news be lost). */
  ttlMs: number;
}

/**
 * Answers of the public chat-log search, kept until the archive changes. The archive is public:
 * an answer depends on the search's parameters only (not on who asks), so the key is the whole
 * normalised search (`searchKey`). Every change the archive's writers report (IrcArchiveChanges,
 * this process's own at once, other coordinators' over Redis) empties the cache; an answer whose
 * computation overlapped a change is returned but not kept. Bounded by size, least recently used
 * out first (lru-cache), and by age (`ttlMs`).
 */
export class IrcSearchCache {
  private readonly lru: LRUCache<string, object> | null;

  constructor(
    private readonly changes: IrcArchiveChanges,
    opts: IrcSearchCacheOptions,
  ) {
    this.lru =
      opts.maxBytes > 0
        ? new LRUCache<string, object>({
            maxSize: opts.maxBytes,
            ttl: opts.ttlMs,
            updateAgeOnGet: false,
            sizeCalculation: (v) => JSON.stringify(v).length || 1,
          })
        : null;
    if (this.lru) {
      const lru = this.lru;
      changes.onChange(() => lru.clear());
    }
  }

  /** The answer under `key`: the cached one, or `compute()`'s (kept unless the archive changed meanwhile). */
  async get<T extends object>(key: string, compute: () => Promise<T>): Promise<T> {
    if (!this.lru) return compute();
    const hit = this.lru.get(key);
    if (hit) return hit as T;
    const generation = this.changes.generation;
    const value = await compute();
    if (this.changes.generation === generation) this.lru.set(key, value);
    return value;
  }

  /** How many answers are held. */
  get size(): number {
    return this.lru?.size ?? 0;
  }
}

/** The cache key of a search: every parameter that shapes the answer (a term's `raw` spelling does not). */
export function searchKey(kind: string, s: LogSearch): string {
  const terms = (ts: LogSearch['include']) => ts.map((t) => [t.kind, t.text]);
  // Typed as every field of LogSearch: a parameter added there must be added here.
  const key: Record<keyof LogSearch, unknown> = {
    source: s.source,
    networkId: s.networkId,
    channelId: s.channelId,
    include: terms(s.include),
    exclude: terms(s.exclude),
    nick: s.nick,
    recipient: s.recipient,
    privateOnly: s.privateOnly,
    date: s.date,
    datetimeFrom: s.datetimeFrom,
    datetimeTo: s.datetimeTo,
    dateFrom: s.dateFrom,
    dateTo: s.dateTo,
    limit: s.limit,
    offset: s.offset,
    includeNetsplit: s.includeNetsplit,
    bulkNetsplit: s.bulkNetsplit,
    eventTypes: s.eventTypes,
    order: s.order,
  };
  return `${kind} ${JSON.stringify(key)}`;
}
