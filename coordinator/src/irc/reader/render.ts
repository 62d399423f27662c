import { LinkifyIt } from 'linkify-it';
import { html, type SafeHtml } from '../../http/html.js';
import type { SearchTerm } from '../search-terms.js';

/** How many nick colours app.css defines (`.nick-c0` … `.nick-c15`, light and dark). */
export const NICK_COLOURS = 16;

/**
 * The CSS class of a nick's colour: FNV-1a over the lower-cased nick without trailing `_` or
 * backquotes (`alice` and `alice_` look alike), so a nick keeps its colour on every page and day.
 * A class and not a style attribute: the CSP allows styles from the stylesheet only.
 */
export function nickClass(nick: string): string {
  const key = nick.toLowerCase().replace(/[_`]+$/, '') || nick.toLowerCase();
  let h = 0x811c9dc5;
  for (const ch of key) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return `nick-c${h % NICK_COLOURS}`;
}

// Only explicit http(s) links: no fuzzy `example.com` (a file name like `setup.py` is not a link),
// no ftp:, mailto: or protocol-relative `//` links, and never javascript: or data: (no rule for them).
const linkify = new LinkifyIt({ fuzzyLink: false, fuzzyEmail: false, fuzzyIP: false }).add('ftp:', null).add('mailto:', null).add('//', null);

/** The http(s) links in a text, as [start, end, href] with the href normalised by linkify-it and checked by URL. */
function links(text: string): Array<[number, number, string]> {
  if (!linkify.test(text)) return [];
  return (linkify.match(text) ?? []).flatMap((m) => {
    try {
      const url = new URL(m.url);
      return url.protocol === 'http:' || url.protocol === 'https:' ? [[m.index, m.lastIndex, url.href] as [number, number, string]] : [];
    } catch {
      return [];
    }
  });
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const NOT_WORD_BEFORE = '(?<![\\p{L}\\p{N}])';
const NOT_WORD_AFTER = '(?![\\p{L}\\p{N}])';

/**
 * One regular expression matching what the search's included terms match in a text, the way the
 * search vector does: whole words, word prefixes, tokens and substrings as written, phrases with
 * any punctuation between their words. Null when there is nothing to mark.
 */
export function highlighter(terms: readonly SearchTerm[]): RegExp | null {
  const parts = terms.flatMap((t) => {
    const text = escapeRe(t.text);
    switch (t.kind) {
      case 'word':
        return [`${NOT_WORD_BEFORE}${text}${NOT_WORD_AFTER}`];
      case 'prefix':
        return [`${NOT_WORD_BEFORE}${text}[\\p{L}\\p{N}]*`];
      case 'phrase':
        return [`${NOT_WORD_BEFORE}${t.text.split(' ').map(escapeRe).join('[^\\p{L}\\p{N}]+')}${NOT_WORD_AFTER}`];
      case 'token':
      case 'substring':
        return text ? [text] : [];
    }
  });
  // Longer alternatives first, so `foo_bar` wins over `foo`.
  return parts.length ? new RegExp(parts.sort((a, b) => b.length - a.length).join('|'), 'giu') : null;
}

/** Escapes a text and wraps what `mark` matches in <mark> (each piece escaped on its own: an entity is never split). */
export function markedText(text: string, mark: RegExp | null): SafeHtml {
  if (!mark || !text) return html`${text}`;
  const out: SafeHtml[] = [];
  let at = 0;
  for (const m of text.matchAll(mark)) {
    if (!m[0]) continue;
    out.push(html`${text.slice(at, m.index)}<mark>${m[0]}</mark>`);
    at = m.index + m[0].length;
  }
  out.push(html`${text.slice(at)}`);
  return html`${out}`;
}

/**
 * A log message as HTML: escaped, http(s) links made anchors (`rel="nofollow noopener ugc"`, the
 * href escaped like any attribute), and the search's matches marked.
 */
export function messageHtml(text: string | null, mark: RegExp | null = null): SafeHtml {
  if (!text) return html``;
  const out: SafeHtml[] = [];
  let at = 0;
  for (const [start, end, href] of links(text)) {
    out.push(markedText(text.slice(at, start), mark));
    out.push(html`<a href="${href}" rel="nofollow noopener ugc">${markedText(text.slice(start, end), mark)}</a>`);
    at = end;
  }
  out.push(markedText(text.slice(at), mark));
  return html`${out}`;
}
