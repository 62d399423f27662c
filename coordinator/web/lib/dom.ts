/** Small DOM helpers for the console's modules (no framework: the pages are server-rendered). */

/** The element with this id, typed; throws when the page lacks it (a page/module mismatch is a bug). */
export function byId(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing from the page`);
  return el;
}

/** The element with this id when it is of the expected kind (a form, an input…). */
export function byIdAs<T extends HTMLElement>(id: string, kind: abstract new () => T): T {
  const el = byId(id);
  if (!(el instanceof kind)) throw new Error(`#${id} is not a ${kind.name}`);
  return el;
}

/** The element with this id, or null where the page may leave it out. */
export const maybeId = (id: string): HTMLElement | null => document.getElementById(id);

/** A new element with text content (never HTML: nothing from the server is parsed as markup). */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { className?: string; text?: string; data?: Record<string, string> } = {},
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.className) node.className = props.className;
  if (props.text !== undefined) node.textContent = props.text;
  for (const [k, v] of Object.entries(props.data ?? {})) node.dataset[k] = v;
  return node;
}

/** The page's CSRF token (the sign-out form carries it on every signed-in page). */
export function csrfToken(): string {
  const input = document.querySelector<HTMLInputElement>('form[action="/logout"] input[name="_csrf"]');
  return input?.value ?? '';
}
