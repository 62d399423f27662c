import type { FastifyInstance } from 'fastify';
import type { Orm } from '../../db/orm.js';
import type { SpamService } from '../spam/spam-service.js';
import { guestbookConsole } from './guestbook-pages.js';
import { guestbookRoutes } from './guestbook-routes.js';
import { GuestbookService } from './guestbook-service.js';

/** Guestbooks: the public form and entries, the owners' API and moderation pages. */
export async function guestbookPlugin(app: FastifyInstance, opts: { orm: Orm; spam: SpamService }) {
  const service = new GuestbookService(opts.orm, opts.spam);
  await app.register(async (api) => guestbookRoutes(api, service));
  await app.register(async (pages) => guestbookConsole(pages, service));
}
