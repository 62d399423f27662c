/**
 * Credential lookups reused for a short time (AUTH_CACHE_SECONDS), so that a busy client's requests
 * do not each cost a PostgreSQL round trip for the same user or key.
 *
 * Revocation: every change to users, their permissions or DNS API keys made through an
 * `AccountService` in this process (HTTP admin routes, the CLI's in-process calls, tests) calls
 * `credentialsChanged()`, which empties every cache in the process at once; a change made by another
 * process (the admin CLI, another coordinator, SQL by hand) applies when the entry is older than the
 * cache's time, so within AUTH_CACHE_SECONDS.
 */
let generation = 0;

/** A user, a permission or a key changed: every credential cache of this process forgets what it holds. */
export function credentialsChanged(): void {
  generation++;
}

/** The most entries one cache holds; the oldest go first. */
const MAX_ENTRIES = 10_000;

export class CredentialCache<K, V> {
  private readonly entries = new Map<K, { value: V; at: number; generation: number }>();

  /**
   * @param ttlMs how long an entry is used (0: never cached)
   * @param keep whether a loaded value may be kept (unknown keys are not: they would only fill the cache)
   */
  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
    private readonly keep: (value: V) => boolean = () => true,
  ) {}

  async get(key: K, load: () => Promise<V>): Promise<V> {
    if (this.ttlMs <= 0) return load();
    const now = this.now();
    const hit = this.entries.get(key);
    if (hit && hit.generation === generation && now - hit.at < this.ttlMs) return hit.value;
    const seen = generation;
    const value = await load();
    // A change while it loaded: what was read may be older than the change, so it is not kept.
    if (seen === generation && this.keep(value)) {
      this.entries.delete(key);
      if (this.entries.size >= MAX_ENTRIES) {
        const oldest = this.entries.keys().next();
        if (!oldest.done) this.entries.delete(oldest.value);
      }
      // Aged from before the read began: never trusted for longer than the time it promises.
      this.entries.set(key, { value, at: now, generation: seen });
    } else if (hit) this.entries.delete(key);
    return value;
  }
}
