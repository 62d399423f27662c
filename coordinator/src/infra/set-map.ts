/**
 * Sets of values filed under keys; a key goes away with its last value. Each set keeps insertion
 * order, so its first value is the one added longest ago.
 */
export class SetMap<K, V> {
  private readonly sets = new Map<K, Set<V>>();
  private count = 0;

  add(key: K, value: V): void {
    let set = this.sets.get(key);
    if (!set) this.sets.set(key, (set = new Set()));
    if (!set.has(value)) {
      set.add(value);
      this.count++;
    }
  }

  /** False when the value was not filed under the key. */
  delete(key: K, value: V): boolean {
    const set = this.sets.get(key);
    if (!set?.delete(value)) return false;
    this.count--;
    if (!set.size) this.sets.delete(key);
    return true;
  }

  /** The values under `key`, oldest first (a copy: the caller may change the map while it walks them). */
  get(key: K): V[] {
    return [...(this.sets.get(key) ?? [])];
  }

  /** The value added longest ago under `key`. */
  first(key: K): V | undefined {
    for (const value of this.sets.get(key) ?? []) return value;
    return undefined;
  }

  keys(): K[] {
    return [...this.sets.keys()];
  }

  /** Values under every key. */
  get size(): number {
    return this.count;
  }
}
