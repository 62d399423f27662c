/**
 * Free-text terms of the chat-log search (`q`, `include_terms`, `exclude_terms`).
 *
 *   word  "+word"  -word  "a phrase"  +"a phrase"  -"a phrase"  prefix*  *infix
 *
 * Bare and `+` terms must all match; `-` terms exclude. How each term matches the stored search
 * vector (see migration 0007) decides its kind:
 *  - word:   letters/digits only → the lexeme itself (no stemming: `running` does not find `run`);
 *  - token:  a nick, URL or code token with punctuation (`f10__`, `rysiek|pl`, `don't`, `node.js`)
 *            → the token as written (case-insensitive), also inside a longer token: `don't` finds
 *            `*don't*` and `fine...don't`, `gpii-3544` finds `stegru/windows#GPII-3544+e1f2767`,
 *            `node.js` finds `pouchdb-node.js` (see tokenParts);
 *  - phrase: quoted words → the words adjacent and in order;
 *  - prefix: `qto*` → any word starting with `qto`;
 *  - substring: `*tox` (or a term with no letters or digits, like `->`) → the message contains it
 *            anywhere (trigram index).
 */

export type TermKind = 'word' | 'token' | 'phrase' | 'prefix' | 'substring';

export interface SearchTerm {
  kind: TermKind;
  /** Normalised text: lower case; for word/token/prefix without surrounding punctuation. */
  text: string;
  /** As the user wrote it (for messages). */
  raw: string;
}

export interface ParsedTerms {
  include: SearchTerm[];
  exclude: SearchTerm[];
}

/** Characters trimmed from both ends of a token, the same set the search vector trims (migration 0007). */
const EDGE = `.,:;!?()[]{}<>"'\``;
const isEdge = (ch: string) => EDGE.includes(ch);

export function trimEdges(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && isEdge(s[a]!)) a += 1;
  while (b > a && isEdge(s[b - 1]!)) b -= 1;
  return s.slice(a, b);
}

const ALNUM = /^[\p{L}\p{N}]+$/u;

/** Classifies one unquoted term; null when nothing is left to search for. */
export function classifyTerm(raw: string): SearchTerm | null {
  const lower = raw.toLowerCase();
  if (lower.startsWith('*') && lower.replace(/^\*+|\*+$/g, '').length > 0) {
    return { kind: 'substring', text: lower.replace(/^\*+|\*+$/g, ''), raw };
  }
  if (lower.endsWith('*')) {
    const stem = trimEdges(lower.replace(/\*+$/, ''));
    if (stem) return { kind: 'prefix', text: stem, raw };
  }
  const text = trimEdges(lower);
  if (!text) return lower.trim() ? { kind: 'substring', text: lower.trim(), raw } : null;
  if (ALNUM.test(text)) return { kind: 'word', text, raw };
  if (/\s/.test(text)) return { kind: 'phrase', text, raw };
  return { kind: 'token', text, raw };
}

/**
 * Splits a `q` value into include/exclude terms. A lone `+`/`-` or an empty pair of quotes is
 * ignored; an unclosed quote runs to the end of the text.
 */
export function parseQuery(q: string): ParsedTerms {
  const out: ParsedTerms = { include: [], exclude: [] };
  const re = /([+-]?)(?:"([^"]*)"?|(\S+))/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(q))) {
    const sign = m[1];
    let term: SearchTerm | null = null;
    if (m[2] !== undefined) {
      const words = m[2].trim().replace(/\s+/g, ' ');
      if (words) term = words.includes(' ') ? { kind: 'phrase', text: words.toLowerCase(), raw: `"${m[2]}"` } : classifyTerm(words);
    } else if (m[3] !== undefined) {
      term = classifyTerm(m[3]);
    }
    if (!term) continue;
    (sign === '-' ? out.exclude : out.include).push(term);
  }
  return out;
}

/** `include_terms` / `exclude_terms`: space- or comma-separated terms (quoted phrases allowed). */
export function parseTermList(value: string): SearchTerm[] {
  const out: SearchTerm[] = [];
  const re = /"([^"]*)"?|([^\s,]+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(value))) {
    let term: SearchTerm | null = null;
    if (m[1] !== undefined) {
      const words = m[1].trim().replace(/\s+/g, ' ');
      if (words) term = words.includes(' ') ? { kind: 'phrase', text: words.toLowerCase(), raw: `"${m[1]}"` } : classifyTerm(words);
    } else term = classifyTerm(m[2]!);
    if (term) out.push(term);
  }
  return out;
}

/**
 * The letter-and-digit runs of a token term (`gpii-3544` → `gpii`, `3544`), as the search vector
 * stores the parts of every token with punctuation (migration 0025). A token is found where the
 * index holds all its parts and the row's text then holds the token itself: one GIN scan, then a
 * check of the rows it found. Empty for a token of no letters or digits (emoji, `->`): that one
 * matches its whole lexeme only.
 */
export function tokenParts(text: string): string[] {
  return text.split(/[^\p{L}\p{N}]+/u).filter(Boolean);
}

/** A token term matched by its parts and the text (see tokenParts), not by one lexeme: the per-term counters cannot count it. */
export const isPartsToken = (t: SearchTerm) => t.kind === 'token' && tokenParts(t.text).length > 0;

/** A tsquery literal for one lexeme (quotes doubled, backslashes escaped), optionally as a prefix. */
export function lexemeQuery(lexeme: string, prefix = false): string {
  return `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}'${prefix ? ':*' : ''}`;
}

/** At most this many distinct terms per search (q, include_terms and exclude_terms together). */
export const MAX_TERMS = 16;
/** A `*substring` term needs this many characters: shorter ones cannot use the trigram index and scan every message. */
export const MIN_SUBSTRING = 3;
/** At most this many `*substring` terms per search (each is a trigram scan or a per-row check). */
export const MAX_SUBSTRING_TERMS = 4;

/** Terms without repeats (same kind and text); a term both required and excluded stays in both. */
export function uniqueTerms(terms: SearchTerm[]): SearchTerm[] {
  const seen = new Set<string>();
  return terms.filter((t) => {
    const key = `${t.kind}\n${t.text}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Why these (already de-duplicated) terms cannot be searched, naming the parameter they came from,
 * or null. `from` maps each term to its parameter.
 */
export function termProblem(include: SearchTerm[], exclude: SearchTerm[], from: Map<SearchTerm, string>): string | null {
  const all = [...include, ...exclude];
  const name = (t: SearchTerm) => from.get(t) ?? 'q';
  if (all.length > MAX_TERMS) return `${name(all[MAX_TERMS]!)}: at most ${MAX_TERMS} different terms per search (q, include_terms and exclude_terms together)`;
  const short = all.find((t) => t.kind === 'substring' && Array.from(t.text).length < MIN_SUBSTRING);
  if (short) return `${name(short)}: a substring term ("${short.raw}") needs at least ${MIN_SUBSTRING} characters`;
  const subs = all.filter((t) => t.kind === 'substring');
  if (subs.length > MAX_SUBSTRING_TERMS) return `${name(subs[MAX_SUBSTRING_TERMS]!)}: at most ${MAX_SUBSTRING_TERMS} *substring terms per search`;
  return null;
}
