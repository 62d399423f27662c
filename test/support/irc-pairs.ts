import type { TestApp } from './harness.js';

/**
 * The chat-log word-pair counts as the archive keeps them (irc_term_pairs) and as recounted here
 * from the rows (every common lexeme with every other frequent one in the same row, netsplit rows
 * aside), each as JSON in one order, so a test can compare the two.
 */
export async function pairCounts(t: TestApp): Promise<{ kept: string; counted: string; rows: number }> {
  const k = t.orm.em.getConnection().getKnex();
  const kept = (await k.raw(`select common, term, channel_id, n from irc_term_pairs where n > 0 order by 1, 2, 3`)).rows as unknown[];
  const counted = (
    await k.raw(
      `select h.lexeme as common, l.lexeme as term, e.channel_id, count(*)::int as n
         from irc_events e cross join lateral unnest(e.search_vector) h cross join lateral unnest(e.search_vector) l
        where e.event_type not in ('NETSPLIT', 'NETMERGE') and l.lexeme <> h.lexeme
          and h.lexeme in (select term from irc_frequent_terms where common) and l.lexeme in (select term from irc_frequent_terms)
        group by 1, 2, 3 order by 1, 2, 3`,
    )
  ).rows as unknown[];
  return { kept: JSON.stringify(kept), counted: JSON.stringify(counted), rows: counted.length };
}
