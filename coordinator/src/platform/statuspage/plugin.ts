import type { FastifyInstance } from 'fastify';
import type { Orm } from '../../db/orm.js';
import { statusPageConsole } from './statuspage-pages.js';
import { statusPageRoutes } from './statuspage-routes.js';
import { StatusPageService } from './statuspage-service.js';

/** Status pages: the public JSON and HTML page, the management API and the owners' pages. */
export async function statusPagePlugin(app: FastifyInstance, opts: { orm: Orm; publicBaseUrl: string }) {
  const service = new StatusPageService(opts.orm, opts.publicBaseUrl);
  await app.register(async (api) => statusPageRoutes(api, service));
  await app.register(async (pages) => statusPageConsole(pages, service));
}
