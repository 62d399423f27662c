import { describe, expect, it } from 'vitest';
import { SetMap } from '../src/infra/set-map.js';

describe('SetMap', () => {
  it('files values under keys, oldest first, and drops a key with its last value', () => {
    const m = new SetMap<string, number>();
    m.add('a', 1);
    m.add('a', 2);
    m.add('a', 1); // already there: counted once
    m.add('b', 3);
    expect(m.size).toBe(3);
    expect(m.first('a')).toBe(1);
    expect(m.get('a')).toEqual([1, 2]);
    expect(m.keys()).toEqual(['a', 'b']);
    expect(m.delete('a', 1)).toBe(true);
    expect(m.delete('a', 1)).toBe(false);
    expect(m.first('a')).toBe(2);
    expect(m.delete('b', 3)).toBe(true);
    expect(m.keys()).toEqual(['a']);
    expect(m.get('b')).toEqual([]);
    expect(m.first('b')).toBeUndefined();
    expect(m.size).toBe(1);
  });

  it('get returns a copy, so values can be deleted while walking them', () => {
    const m = new SetMap<string, number>();
    for (const v of [1, 2, 3]) m.add('k', v);
    for (const v of m.get('k')) m.delete('k', v);
    expect(m.size).toBe(0);
    expect(m.keys()).toEqual([]);
  });
});
