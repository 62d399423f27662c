import type { FastifyInstance } from 'fastify';
import { installDomainErrors, okReasonBody } from '../http/errors.js';
import type { AccountsDeps } from '../deps.js';
import { accountPages } from './pages.js';
import { accountRoutes } from './routes.js';

/** Accounts: JSON API under /api/account and the browser sign-in pages. */
export async function accountsPlugin(app: FastifyInstance, deps: AccountsDeps) {
  await app.register(async (api) => {
    installDomainErrors(api, okReasonBody);
    await accountRoutes(api, deps);
  });
  await app.register(async (pages) => accountPages(pages, deps));
}
