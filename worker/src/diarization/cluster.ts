/**
 * Ward agglomerative clustering of n points from their n × n matrix of squared Euclidean
 * distances, by the nearest-neighbour-chain algorithm: O(n²) time and one n × n matrix (Ward's
 * criterion is reducible, so the chain finds exactly the merges of the classic O(n³) loop).
 * Hand-written: the npm clustering packages seen (ml-hclust and others) copy the matrix into
 * arrays of arrays and merge in O(n³), and none cuts the dendrogram by height and by count together.
 */
export interface Merge {
  a: number;
  b: number;
  /**
   * Lance–Williams Ward distance of the two clusters: 2 nA nB / (nA + nB) · |mean A − mean B|²,
   * twice the growth of the within-cluster sum of squares that the merge causes.
   */
  height: number;
}

/** The merges of Ward clustering, in increasing height. `dist` (squared distances) is consumed (overwritten). */
export function wardLinkage(dist: Float64Array, n: number): Merge[] {
  const size = new Int32Array(n).fill(1);
  const active = new Uint8Array(n).fill(1);
  const merges: Merge[] = [];
  const chain: number[] = [];
  let remaining = n;
  while (remaining > 1) {
    if (!chain.length) {
      let first = 0;
      while (!active[first]) first++;
      chain.push(first);
    }
    const a = chain[chain.length - 1]!;
    const prev = chain.length >= 2 ? chain[chain.length - 2]! : -1;
    let best = prev;
    let bestD = prev >= 0 ? dist[a * n + prev]! : Infinity;
    for (let j = 0; j < n; j++) {
      if (j === a || !active[j]) continue;
      const d = dist[a * n + j]!;
      if (d < bestD) {
        bestD = d;
        best = j;
      }
    }
    if (best === prev && prev >= 0) {
      chain.length -= 2;
      // Cluster a ∪ prev lives on in slot `a`; Lance–Williams update for Ward's criterion.
      const na = size[a]!;
      const nb = size[prev]!;
      for (let k = 0; k < n; k++) {
        if (!active[k] || k === a || k === prev) continue;
        const nk = size[k]!;
        const d = ((nk + na) * dist[a * n + k]! + (nk + nb) * dist[prev * n + k]! - nk * bestD) / (nk + na + nb);
        dist[a * n + k] = d;
        dist[k * n + a] = d;
      }
      size[a] = na + nb;
      active[prev] = 0;
      remaining--;
      merges.push({ a, b: prev, height: bestD });
    } else {
      chain.push(best);
    }
  }
  return merges.sort((x, y) => x.height - y.height);
}

/**
 * Cuts the dendrogram: merges below `threshold` are applied, then more (or fewer) so that the
 * cluster count lies in [minClusters, maxClusters]. Returns a label per point, 0..k-1.
 */
export function cutDendrogram(merges: Merge[], n: number, threshold: number, minClusters = 1, maxClusters = Infinity): Int32Array {
  let applied = merges.filter((m) => m.height < threshold).length;
  applied = Math.max(applied, n - maxClusters);
  applied = Math.min(applied, n - Math.max(1, minClusters));
  applied = Math.max(0, Math.min(applied, merges.length));
  const parent = Int32Array.from({ length: n }, (_, i) => i);
  const find = (x: number): number => {
    while (parent[x] !== x) {
      parent[x] = parent[parent[x]!]!;
      x = parent[x]!;
    }
    return x;
  };
  for (let i = 0; i < applied; i++) {
    const m = merges[i]!;
    parent[find(m.a)] = find(m.b);
  }
  const labels = new Int32Array(n);
  const ids = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const r = find(i);
    let id = ids.get(r);
    if (id === undefined) {
      id = ids.size;
      ids.set(r, id);
    }
    labels[i] = id;
  }
  return labels;
}
