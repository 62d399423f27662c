import type { FastifyInstance } from 'fastify';
import formBody from '@fastify/formbody';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { formatStockholm, safeString, idParam } from '@sonar/shared';
import { userOf } from '../../accounts/auth-plugin.js';
import type { AuthRequirement } from '../../accounts/types.js';
import { normalizeError } from '../../http/errors.js';
import { html, layout } from '../../http/html.js';
import { pageErrorHandler, sendPage } from '../../http/page.js';
import { slugSchema } from '../statuspage/statuspage-schemas.js';
import type { EntryStatus, GuestbookService } from './guestbook-service.js';

const signedIn: AuthRequirement = { accept: ['session'] };
const hidden = { hide: true } as const;
const LIMIT = { max: 120, timeWindow: '1 minute' };
const csrfField = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`;
const maxId = idParam();

interface PublicList {
  guestbook: { slug: string; title: string; description: string };
  total: number;
  entries: Array<{ id: number; name: string; message: string; created_at: string }>;
}

/**
 * The public guestbook: the form (a plain POST, no JavaScript; `website` is the hidden honeypot)
 * and the published entries.
 */
export function renderGuestbookPage(list: PublicList, opts: { submitted?: 'published' | 'pending' | undefined; error?: string }): string {
  const g = list.guestbook;
  const notice =
    opts.submitted === 'published'
      ? 'Thank you: your entry is published.'
      : opts.submitted === 'pending'
        ? 'Thank you: your entry will appear once the owner approves it.'
        : null;
  const body = html`<div class="card"><h1>${g.title}</h1>${g.description ? html`<p>${g.description}</p>` : ''}</div>
    ${notice ? html`<div class="card notice" role="status" id="notice"><p>${notice}</p></div>` : ''}
    <div class="card" id="sign"><h2>Sign the guestbook</h2>
      ${opts.error ? html`<p class="error" role="alert" id="form-error">${opts.error}</p>` : ''}
      <form method="post" action="/guestbook/${g.slug}/entries" id="guestbook-form">
        <label for="gb-name">Your name</label><input id="gb-name" name="name" required maxlength="100" autocomplete="name">
        <label for="gb-message">Message</label><textarea id="gb-message" name="message" required maxlength="4000" rows="4"></textarea>
        <div class="hp" aria-hidden="true"><label for="gb-website">Leave this field empty</label><input id="gb-website" name="website" tabindex="-1" autocomplete="off"></div>
        <button type="submit">Sign</button></form>
      <p class="muted">Entries are checked for spam; some are published only after the owner approves them.</p></div>
    <div class="card" id="entries"><h2>Entries (${list.total})</h2>${
      list.entries.length
        ? html`<ol class="gb-entries">${list.entries.map(
            (e) =>
              html`<li data-entry="${e.id}"><p class="gb-message">${e.message}</p><p class="muted">— ${e.name}, <time datetime="${e.created_at}">${formatStockholm(new Date(e.created_at))}</time></p></li>`,
          )}</ol>`
        : html`<p class="muted" id="no-entries">No entries yet.</p>`
    }</div>`;
  return layout({ title: g.title, body, user: null });
}

/** Owners' pages: /guestbooks (theirs, create one) and /guestbooks/{id} (moderation), plain CSRF forms. */
export async function guestbookConsole(base: FastifyInstance, books: GuestbookService) {
  await base.register(formBody);
  base.setErrorHandler((error, request, reply) => pageErrorHandler(request, reply, normalizeError(error, request)));
  const app = base.withTypeProvider<ZodTypeProvider>();
  const opts = { config: { auth: signedIn, rateLimit: LIMIT } };

  app.get('/guestbooks', { ...opts, schema: hidden }, async (request, reply) => {
    const user = userOf(request);
    const list = await books.listBooks(user);
    const csrf = reply.generateCsrf();
    const body = html`<div class="card"><h1>Guestbooks</h1>
      <p class="muted">Guestbooks you own${user.isAdmin ? ' (as an administrator you see every guestbook)' : ''}. Entries scored as ham are published at once; spam and entries that could not be scored wait for you here.</p>
      ${
        list.length
          ? html`<div class="table-wrap"><table id="guestbook-table"><thead><tr><th>Guestbook</th><th>Owner</th><th>Waiting</th><th>Published</th><th>Public</th></tr></thead><tbody>${list.map(
              (g) =>
                html`<tr data-guestbook="${g.slug}"><td><a href="/guestbooks/${g.id}">${g.title}</a></td><td>${g.owner}</td><td>${g.pending}</td><td>${g.published}</td><td><a href="/guestbook/${g.slug}">/guestbook/${g.slug}</a></td></tr>`,
            )}</tbody></table></div>`
          : html`<p id="no-guestbooks">No guestbook yet.</p>`
      }</div>
      <div class="card"><h2>New guestbook</h2><form method="post" action="/guestbooks" id="create-guestbook">${csrfField(csrf)}
        <label for="gb-title">Title</label><input id="gb-title" name="title" required maxlength="200">
        <label for="gb-slug">Slug</label><input id="gb-slug" name="slug" required maxlength="64">
        <label for="gb-description">Description</label><textarea id="gb-description" name="description" maxlength="2000" rows="2"></textarea>
        <label><input type="checkbox" name="hold_all"> Hold every entry for moderation</label>
        <button type="submit">Create</button></form></div>`;
    return sendPage(reply, { title: 'Guestbooks', user, body });
  });

  app.post(
    '/guestbooks',
    {
      ...opts,
      schema: {
        ...hidden,
        body: z.object({
          _csrf: z.string().max(200).optional(),
          slug: slugSchema,
          title: safeString().trim().min(1).max(200),
          description: safeString({ multiline: true }).max(2000).optional(),
          hold_all: z.literal('on').optional(),
        }),
      },
    },
    async (request, reply) => {
      const b = request.body;
      const book = await books.createBook(userOf(request), { slug: b.slug, title: b.title, description: b.description, hold_all: b.hold_all === 'on' });
      return reply.redirect(`/guestbooks/${book.id}`, 303);
    },
  );

  app.get(
    '/guestbooks/:id',
    {
      ...opts,
      schema: {
        ...hidden,
        params: z.object({ id: maxId }),
        querystring: z.object({ status: z.enum(['pending', 'published', 'rejected']).default('pending') }),
      },
    },
    async (request, reply) => {
      const user = userOf(request);
      const status: EntryStatus = request.query.status;
      const { book, entries } = await books.entries(user, request.params.id, status);
      const csrf = reply.generateCsrf();
      const at = `/guestbooks/${book.id}`;
      const action = (entryId: number, name: 'approve' | 'reject' | 'delete', text: string, cls = '') =>
        html`<form class="inline" method="post" action="${at}/entries/${entryId}/${name}">${csrfField(csrf)}<button type="submit" class="${cls}">${text}</button></form>`;
      const body = html`<div class="card"><h1>${book.title}</h1><p class="muted">Owner ${book.owner} · public at <a href="/guestbook/${book.slug}">/guestbook/${book.slug}</a> ·
        ${book.hold_all ? 'every entry waits for moderation' : 'ham is published at once'} · <a href="/guestbooks">all guestbooks</a></p>
        <nav class="tabs" aria-label="Entries">${(['pending', 'published', 'rejected'] as const).map(
          (s) => html`<a href="${at}?status=${s}" ${s === status ? html`aria-current="page"` : ''}>${s === 'pending' ? `Waiting (${book.pending})` : s}</a> `,
        )}</nav></div>
        <div class="card" id="moderation"><h2>${status === 'pending' ? 'Waiting for moderation' : status === 'published' ? 'Published' : 'Rejected'}</h2>${
          entries.length
            ? html`<ol class="gb-entries">${entries.map(
                (e) => html`<li data-entry="${e.id}" data-status="${e.status}"><p class="gb-message">${e.message}</p>
                <p class="muted">— ${e.name}, ${formatStockholm(new Date(e.created_at))} · spam check: <span data-spam="${e.spam.status}">${
                  e.spam.status === 'unavailable'
                    ? 'not scored (analyzer unavailable)'
                    : `${e.spam.verdict} (${e.spam.score} of ${e.spam.threshold}${e.spam.status === 'degraded' ? ', partial' : ''})`
                }</span>${e.spam.rules.length ? html` · rules ${e.spam.rules.map((r) => r.name).join(', ')}` : ''}</p>
                ${e.status !== 'published' ? action(e.id, 'approve', 'Approve') : ''}${e.status !== 'rejected' ? action(e.id, 'reject', 'Reject') : ''}${action(e.id, 'delete', 'Delete', 'danger')}</li>`,
              )}</ol>`
            : html`<p class="muted" id="no-entries">Nothing here.</p>`
        }</div>`;
      return sendPage(reply, { title: book.title, user, body });
    },
  );

  app.post(
    '/guestbooks/:id/entries/:entryId/:action',
    {
      ...opts,
      schema: {
        ...hidden,
        params: z.object({ id: maxId, entryId: maxId, action: z.enum(['approve', 'reject', 'delete']) }),
        body: z.object({ _csrf: z.string().max(200).optional() }).optional(),
      },
    },
    async (request, reply) => {
      const { id, entryId, action } = request.params;
      await books.moderate(userOf(request), id, entryId, action);
      return reply.redirect(`/guestbooks/${id}`, 303);
    },
  );
}
