import { assetUrl, type WebEntry } from './assets.js';

/** Minimal server-side HTML: a tagged template that escapes every interpolation unless marked safe. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString() {
    return this.value;
  }
}

/** What an `html` template interpolates: text and numbers (escaped), markup marked safe, lists of either; null, undefined and false render nothing. */
export type HtmlValue = string | number | boolean | null | undefined | SafeHtml | readonly HtmlValue[];

export function escapeHtml(value: string | number | boolean | null | undefined): string {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

function render(value: HtmlValue): string {
  if (value instanceof SafeHtml) return value.value;
  if (isList(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(value);
}

// Array.isArray does not narrow a readonly array type.
const isList = (value: HtmlValue): value is readonly HtmlValue[] => Array.isArray(value);

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? '');
  });
  return new SafeHtml(out);
}

/**
 * A long dotted name (a zone, a host name) that may wrap after each dot on a narrow screen instead
 * of in the middle of a label: the text escaped, a `<wbr>` after every dot but a final one.
 */
export const breakAtDots = (name: string): SafeHtml => new SafeHtml(escapeHtml(name).replace(/\.(?=.)/g, '.<wbr>'));

/** "1 channel", "2,048 channels": a count with its noun in the right number. */
export const plural = (n: number, one: string, many = `${one}s`): string => `${n.toLocaleString('en')} ${n === 1 ? one : many}`;

/** Who the layout greets and which parts of the console it links to. */
export interface PageUser {
  username: string;
  isAdmin: boolean;
  permissions: readonly string[];
}

/** The parts of the console in the navigation, each shown to those who may use it. */
const NAV: ReadonlyArray<{ key: string; href: string; label: string; visible: (u: PageUser) => boolean }> = [
  { key: 'home', href: '/', label: 'Home', visible: () => true },
  { key: 'speech', href: '/speech', label: 'Speech', visible: (u) => u.isAdmin || u.permissions.includes('speech.use') },
  // Zone rights are per zone: /dns lists the ones the user may read (none is a valid answer).
  { key: 'dns', href: '/dns', label: 'DNS', visible: () => true },
  { key: 'irc', href: '/irc', label: 'Chat logs', visible: () => true },
  // A user an assistant setup may be delegated to (administrators reach it from /admin).
  { key: 'assistant', href: '/admin/assistant', label: 'Assistant', visible: (u) => !u.isAdmin && u.permissions.includes('ai.assistant') },
  { key: 'admin', href: '/admin', label: 'Admin', visible: (u) => u.isAdmin },
];

export interface LayoutOptions {
  title: string;
  body: SafeHtml;
  user?: PageUser | null;
  /** The CSRF token of the sign-out form (pages for a signed-in user). */
  csrf?: string;
  head?: SafeHtml;
  /** The request's CSP script nonce (reply.cspNonce.script): every <script> carries it. */
  nonce?: string;
  /** Bundled browser modules the page runs (coordinator/web/pages). */
  scripts?: readonly WebEntry[];
  /** The navigation entry to mark as the current part. */
  active?: string;
}

/** The page frame: stylesheet, header with the navigation the user may use, the body, and the page's modules. */
export function layout(opts: LayoutOptions): string {
  const user = opts.user ?? null;
  const nonce = opts.nonce ?? '';
  const links = user
    ? NAV.filter((n) => n.visible(user)).map(
        (n) => html`<a href="${n.href}" ${opts.active === n.key ? new SafeHtml('aria-current="page"') : ''}>${n.label}</a>`,
      )
    : [];
  const account = user
    ? html`<nav class="account" aria-label="Account"><a href="/account" title="Personal access tokens">${user.username}</a><a href="/docs">API docs</a>
        <form class="inline" method="post" action="/logout"><input type="hidden" name="_csrf" value="${opts.csrf ?? ''}"><button class="link" type="submit">Sign out</button></form></nav>`
    : html`<nav class="account" aria-label="Account"><a href="/login">Sign in</a><a href="/docs">API docs</a></nav>`;
  // common.js (confirmations of signed-in forms) only where someone is signed in: public pages stay script-free.
  const scripts = [...(user ? ['common.js' as const] : []), ...(opts.scripts ?? [])].map(
    (s) => html`<script type="module" src="${assetUrl(s)}" nonce="${nonce}"></script>`,
  );
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${opts.title} · Sonar</title><link rel="icon" href="/favicon.svg" type="image/svg+xml"><link rel="stylesheet" href="${assetUrl('app.css')}">${opts.head ?? ''}${scripts}</head>
<body><header class="top"><a class="brand" href="/">Sonar</a>${links.length ? html`<nav class="main" aria-label="Main">${links}</nav>` : ''}${account}</header>
<main>${opts.body}</main></body></html>`.value;
}
