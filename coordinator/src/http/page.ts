import type { FastifyReply, FastifyRequest } from 'fastify';
import type { NormalizedError } from './errors.js';
import { html, layout, type LayoutOptions, type PageUser, type SafeHtml } from './html.js';

/** The CSP nonce @fastify/helmet made for this response's scripts ('' where helmet is not registered). */
export const scriptNonce = (reply: FastifyReply): string => reply.cspNonce?.script ?? '';

/**
 * Sends a server-rendered page in the layout: the response's script nonce, and for a signed-in
 * user the CSRF token of the sign-out form.
 */
export function sendPage(reply: FastifyReply, opts: Omit<LayoutOptions, 'nonce' | 'csrf'> & { user: PageUser | null }) {
  return reply.type('text/html; charset=utf-8').send(layout({ ...opts, nonce: scriptNonce(reply), ...(opts.user ? { csrf: reply.generateCsrf() } : {}) }));
}

const TITLES: Record<number, string> = {
  403: 'Not allowed',
  404: 'Not found',
  414: 'Address too long',
  422: 'Cannot do that',
  429: 'Too many requests',
  503: 'Temporarily unavailable',
};

/**
 * The one HTML error page of the console (sign-in pages, speech pages, admin, DNS and chat-log
 * pages, the share page): the layout with navigation and the signed-in user, the status's title and
 * the message. `body` replaces the default card (the share page's "transcript not found").
 */
export async function sendErrorPage(
  request: FastifyRequest,
  reply: FastifyReply,
  e: NormalizedError,
  opts: { body?: SafeHtml; user?: PageUser | null; head?: SafeHtml } = {},
) {
  if (e.headers) void reply.headers(e.headers); // Retry-After of a 503
  let user = opts.user;
  if (user === undefined) {
    const principal = request.principal;
    user = principal?.user ?? (await request.server.sessionUser(request).catch(() => null));
  }
  const title = TITLES[e.status] ?? 'Something went wrong';
  const body =
    opts.body ??
    html`<div class="card error-page" data-status="${e.status}"><h1>${title}</h1><p class="error">${e.message}</p>
      <p><a href="/">Home</a>${user ? html` · <a href="/speech">Speech queue</a>` : html` · <a href="/login">Sign in</a>`}</p></div>`;
  return sendPage(reply.code(e.status), { title, body, user, ...(opts.head ? { head: opts.head } : {}) });
}

/** A page's error handler: anonymous visitors go to sign in (and come back), other errors get the error page. */
export function pageErrorHandler(request: FastifyRequest, reply: FastifyReply, e: NormalizedError) {
  if (e.reason === 'unauthenticated') return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 303);
  return sendErrorPage(request, reply, e);
}
