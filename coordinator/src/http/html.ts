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

const STYLE = `
:root{color-scheme:light dark;--fg:#1d1f23;--muted:#5d6470;--bg:#fafafa;--card:#fff;--line:#d9dce1;--accent:#2456c8;--bad:#b42318}
@media (prefers-color-scheme:dark){:root{--fg:#e7e9ec;--muted:#a3a9b3;--bg:#15171a;--card:#1d2024;--line:#343941;--accent:#7aa2ff;--bad:#ff8a80}}
*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;gap:1rem;align-items:center;justify-content:space-between;padding:.75rem 1.25rem;border-bottom:1px solid var(--line);background:var(--card)}
header a{color:inherit;text-decoration:none;font-weight:600}nav{display:flex;gap:1rem;align-items:center}nav a{font-weight:400;color:var(--accent)}
main{max-width:56rem;margin:2rem auto;padding:0 1.25rem}.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1.25rem 1.5rem;margin-bottom:1.25rem}
label{display:block;margin:.75rem 0 .25rem;font-weight:600}input,select{width:100%;padding:.5rem .6rem;border:1px solid var(--line);border-radius:6px;background:transparent;color:inherit;font:inherit}
button{margin-top:1rem;padding:.5rem 1rem;border:0;border-radius:6px;background:var(--accent);color:#fff;font:inherit;cursor:pointer}button.link{background:none;color:var(--accent);padding:0;margin:0}
.error{color:var(--bad);font-weight:600}.muted{color:var(--muted)}code,.secret{font-family:ui-monospace,monospace;word-break:break-all}
table{width:100%;border-collapse:collapse}th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
.checks label{display:inline-flex;gap:.35rem;font-weight:400;margin-right:1rem}.checks input{width:auto}form.inline{display:inline}
`;

export function layout(opts: { title: string; body: SafeHtml; user?: { username: string } | null; csrf?: string; head?: SafeHtml }): string {
  const nav = opts.user
    ? html`<nav><a href="/account">${opts.user.username}</a><a href="/docs">API docs</a>
        <form class="inline" method="post" action="/logout"><input type="hidden" name="_csrf" value="${opts.csrf ?? ''}"><button class="link" type="submit">Sign out</button></form></nav>`
    : html`<nav><a href="/docs">API docs</a></nav>`;
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${opts.title} · Sonar</title>${opts.head ?? ''}<style>${new SafeHtml(STYLE)}</style></head>
<body><header><a href="/">Sonar</a>${nav}</header><main>${opts.body}</main></body></html>`.value;
}
