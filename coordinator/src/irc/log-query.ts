/**
 * SQL for `/irc/api/logs`: turns validated filters into WHERE fragments over `irc_events e`.
 * Everything user-supplied is a binding; fragments are fixed text.
 */
import { escapeLike } from '../db/like.js';
import { isPartsToken, lexemeQuery, tokenParts, type SearchTerm } from './search-terms.js';

export interface Fragment {
  sql: string;
  bindings: unknown[];
}

export interface LogFilter {
  /** Channels in scope (source, network, channel, private_only already applied); null = every channel in the archive. */
  channelIds: number[] | null;
  /** Or, when that is the shorter list: the channels out of scope. */
  excludedChannelIds?: number[] | null;
  include: SearchTerm[];
  exclude: SearchTerm[];
  /** Lower-case nick keys (the person's aliases). */
  nickKeys: string[] | null;
  recipient: string | null;
  /** UTC `YYYY-MM-DD HH:MM:SS`, inclusive. */
  from: string | null;
  /** UTC `YYYY-MM-DD HH:MM:SS`; inclusive unless `toExclusive`. */
  to: string | null;
  toExclusive: boolean;
  includeNetsplit: boolean;
  bulkNetsplit: boolean;
  /** Channel ids whose name a word/token term names, per term (`q=qtox` also matches rows in #qtox). */
  channelsByTerm: Map<SearchTerm, number[]>;
  /** Only these event types; null: all. */
  eventTypes?: string[] | null;
}

/** The tsquery expression (and its bindings) for one non-substring term. */
function tsQuery(t: SearchTerm): Fragment {
  switch (t.kind) {
    case 'word':
      return { sql: `plainto_tsquery('simple', irc_fts_text(?))`, bindings: [t.text] };
    case 'phrase':
      // Through irc_fts_text, as the search vector reads the text (migration 0025): `<` and `>`
      // are spaces, so `"a <style> element"` is three adjacent words, not a tag.
      return { sql: `phraseto_tsquery('simple', irc_fts_text(?))`, bindings: [t.text] };
    case 'token':
      // A token with letters or digits: all its parts (the text check is `recheck`).
      if (isPartsToken(t))
        return {
          sql: `?::tsquery`,
          bindings: [
            tokenParts(t.text)
              .map((p) => lexemeQuery(p))
              .join(' & '),
          ],
        };
      return { sql: `?::tsquery`, bindings: [lexemeQuery(t.text)] };
    case 'prefix':
      return { sql: `?::tsquery`, bindings: [lexemeQuery(t.text, true)] };
    case 'substring':
      throw new Error('substring terms have no tsquery');
  }
}

/**
 * For a token matched by its parts: the row's text holds the token as written (lower case), checked
 * on the rows the index found (a filter, not an index condition). Null for every other term.
 */
function recheck(t: SearchTerm): Fragment | null {
  if (!isPartsToken(t)) return null;
  return { sql: `lower(concat_ws(' ', e.nick, e.message_text, e.target, e.to_nick)) like ?`, bindings: [`%${escapeLike(t.text)}%`] };
}

/** The whole condition of one non-substring term: its tsquery, and its recheck when it has one. */
function termMatch(t: SearchTerm): Fragment {
  const q = tsQuery(t);
  const r = recheck(t);
  return r
    ? { sql: `(e.search_vector @@ ${q.sql} and ${r.sql})`, bindings: [...q.bindings, ...r.bindings] }
    : { sql: `e.search_vector @@ ${q.sql}`, bindings: q.bindings };
}

function join(parts: Fragment[], op: string): Fragment {
  return { sql: parts.map((p) => p.sql).join(op), bindings: parts.flatMap((p) => p.bindings) };
}

/** `search_vector @@ (t1 || t2 …)`: rows matching any of these (non-substring) terms (tokens matched by parts each on their own). */
export function anyTermClause(terms: SearchTerm[]): Fragment {
  const plain = terms.filter((t) => !isPartsToken(t));
  const q = join(plain.map(tsQuery), ' || ');
  const any = [...(plain.length ? [{ sql: `e.search_vector @@ (${q.sql})`, bindings: q.bindings }] : []), ...terms.filter(isPartsToken).map(termMatch)];
  return any.length === 1 ? any[0]! : { sql: `(${join(any, ' or ').sql})`, bindings: any.flatMap((p) => p.bindings) };
}

/**
 * `search_vector @@ (t && (x1 || x2 …))`: rows matching `term` and any of `others`, as one tsquery,
 * so the GIN scan intersects the posting lists itself (stepping through a common word's list by
 * the rarer one's entries) instead of reading each whole list into a bitmap of its own.
 */
export function bothTermsClause(term: SearchTerm, others: SearchTerm[]): Fragment {
  if (isPartsToken(term) || others.some(isPartsToken)) {
    const any = anyTermClause(others);
    const t = termMatch(term);
    return { sql: `${t.sql} and ${any.sql}`, bindings: [...t.bindings, ...any.bindings] };
  }
  const t = tsQuery(term);
  const q = join(others.map(tsQuery), ' || ');
  return { sql: `e.search_vector @@ ((${t.sql}) && (${q.sql}))`, bindings: [...t.bindings, ...q.bindings] };
}

/**
 * Only `-term`s (full-text ones, naming no channel), nothing else narrowing: such a search
 * keeps almost every row, so it is counted as everything in scope less the rows that match.
 */
export function isExclusionOnly(f: LogFilter): boolean {
  return (
    f.include.length === 0 &&
    f.exclude.length > 0 &&
    f.nickKeys === null &&
    f.recipient === null &&
    f.from === null &&
    f.to === null &&
    !f.eventTypes &&
    f.exclude.every((t) => t.kind !== 'substring' && !f.channelsByTerm.has(t))
  );
}

/** True when the filter narrows rows beyond channel scope and netsplit handling. */
export function isSelective(f: LogFilter): boolean {
  return (
    f.include.length > 0 || f.exclude.length > 0 || f.nickKeys !== null || f.recipient !== null || f.from !== null || f.to !== null || Boolean(f.eventTypes)
  );
}

export function hasTextTerms(f: LogFilter): boolean {
  return f.include.length > 0 || f.exclude.length > 0;
}

/**
 * WHERE conditions. Positive full-text terms become one tsquery (one GIN scan); exclusions are a
 * condition of their own, checked on the rows the others found.
 */
export function whereClause(f: LogFilter): Fragment {
  const conds: Fragment[] = [];
  // One channel: a plain equality, so its (channel_id, occurred_at, id) index gives order and
  // paging. Several: written so no index is chosen for it (`+ 0`), because a bitmap over whole
  // networks ANDed with the nick or full-text index costs far more than checking channel_id (an
  // included column of the ordered indexes) on the rows the selective index finds.
  if (f.channelIds?.length === 1) conds.push({ sql: 'e.channel_id = ?', bindings: [f.channelIds[0]] });
  else if (f.channelIds) conds.push({ sql: '(e.channel_id + 0) = any(?::int[])', bindings: [f.channelIds] });
  else if (f.excludedChannelIds?.length) conds.push({ sql: '(e.channel_id + 0) <> all(?::int[])', bindings: [f.excludedChannelIds] });

  const merged: Fragment[] = [];
  for (const t of f.include) {
    if (t.kind === 'substring') {
      conds.push({ sql: `e.message_text ilike ?`, bindings: [`%${escapeLike(t.text)}%`] });
      continue;
    }
    const channels = f.channelsByTerm.get(t);
    if (channels?.length) {
      const m = termMatch(t);
      conds.push({ sql: `(${m.sql} or e.channel_id = any(?::int[]))`, bindings: [...m.bindings, channels] });
    } else {
      // The parts join the one tsquery (one GIN scan); the token itself is checked on what it finds.
      merged.push(tsQuery(t));
      const r = recheck(t);
      if (r) conds.push(r);
    }
  }
  const negatives: Fragment[] = [];
  for (const t of f.exclude) {
    if (t.kind === 'substring') {
      conds.push({ sql: `coalesce(e.message_text, '') not ilike ?`, bindings: [`%${escapeLike(t.text)}%`] });
      continue;
    }
    if (isPartsToken(t)) conds.push({ sql: `not ${termMatch(t).sql}`, bindings: termMatch(t).bindings });
    else negatives.push(tsQuery(t));
    const channels = f.channelsByTerm.get(t);
    if (channels?.length) conds.push({ sql: 'e.channel_id <> all(?::int[])', bindings: [channels] });
  }
  if (merged.length) {
    const pos = join(merged, ' && ');
    conds.push({ sql: `e.search_vector @@ (${pos.sql})`, bindings: pos.bindings });
  }
  if (negatives.length) {
    // A condition of its own, checked on the rows the other conditions found: inside the indexed
    // tsquery (`pos && !!neg`) the GIN scan would read the excluded words' whole posting lists,
    // which for a common word is most of the archive.
    const neg = join(negatives, ' || ');
    conds.push({ sql: `not (e.search_vector @@ (${neg.sql}))`, bindings: neg.bindings });
  }

  if (f.nickKeys?.length === 1) conds.push({ sql: 'lower(e.nick) = ?', bindings: [f.nickKeys[0]] });
  else if (f.nickKeys) conds.push({ sql: 'lower(e.nick) = any(?::text[])', bindings: [f.nickKeys] });
  // MODE targets are mode arguments and a NICK's to_nick is the new nick: neither is addressed to anyone.
  if (f.recipient)
    conds.push({ sql: `(lower(e.target) = ? or lower(e.to_nick) = ?) and e.event_type not in ('MODE', 'NICK')`, bindings: [f.recipient, f.recipient] });
  if (f.eventTypes?.length === 1) conds.push({ sql: 'e.event_type = ?', bindings: [f.eventTypes[0]] });
  else if (f.eventTypes) conds.push({ sql: 'e.event_type = any(?::text[])', bindings: [f.eventTypes] });
  if (f.from) conds.push({ sql: 'e.occurred_at >= ?::timestamp', bindings: [f.from] });
  if (f.to) conds.push({ sql: `e.occurred_at ${f.toExclusive ? '<' : '<='} ?::timestamp`, bindings: [f.to] });
  if (!f.includeNetsplit) conds.push({ sql: `e.event_type not in ('NETSPLIT', 'NETMERGE')`, bindings: [] });
  else if (f.bulkNetsplit) conds.push({ sql: `(e.event_type not in ('NETSPLIT', 'NETMERGE') or e.netsplit_leader)`, bindings: [] });

  return conds.length ? join(conds, ' and ') : { sql: 'true', bindings: [] };
}
