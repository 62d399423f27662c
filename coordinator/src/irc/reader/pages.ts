import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { safeString } from '@sonar/shared';
import { normalizeError, notFound } from '../../http/errors.js';
import type { SafeHtml } from '../../http/html.js';
import { sendErrorPage, sendPage } from '../../http/page.js';
import { sharedRateLimit } from '../../http/rate-limits.js';
import type { IrcArchiveService, LogRow, LogSearch } from '../archive-service.js';
import { ARCHIVE_RANGE_TEXT, isArchiveDay, isArchiveYear } from '../archive-dates.js';
import { DEFAULT_IRC_SOURCE } from '../event-store.js';
import { isValidDate } from '../parsers/common.js';
import { IRC_EVENT_TYPES } from '../parsers/types.js';
import { logsQuery, toSearch, type LogsQuery } from '../routes.js';
import type { IrcReaderStore } from './reader-repository.js';
import { calendarView, channelsView, dayView, networksView, nickView, searchView } from './views.js';

export interface IrcReaderOptions {
  archive: IrcArchiveService;
  store: IrcReaderStore;
  /** The chat-log budget a minute per client, shared with /irc/api. */
  rateLimitMax: number;
}

/** Lines per page of a day (a day with more is paged). */
export const DAY_PAGE = 2000;
/** Results per page of the search page. */
export const SEARCH_PAGE = 50;
/** What the day view hides until `all=1`. */
const PRESENCE = new Set(['JOIN', 'PART', 'QUIT']);

const hidden = { hide: true } as const;
/** An empty form field is an absent one (the search form sends every field). */
const optional = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === '' ? undefined : v), schema.optional());
const name = safeString({ error: 'must be text' }).min(1).max(255);

const searchQuery = z.object({
  q: optional(logsQuery.shape.q.unwrap()),
  nick: optional(logsQuery.shape.nick.unwrap()),
  network_id: optional(logsQuery.shape.network_id.unwrap()),
  channel_id: optional(logsQuery.shape.channel_id.unwrap()),
  date_from: optional(logsQuery.shape.date_from.unwrap()),
  date_to: optional(logsQuery.shape.date_to.unwrap()),
  order: optional(logsQuery.shape.order.unwrap()),
  offset: optional(logsQuery.shape.offset.unwrap()),
});
export type SearchForm = z.infer<typeof searchQuery>;

/**
 * The public chat-log reader: networks → channels → a calendar of days → a day, a search page
 * over the same search as /irc/api/logs, and a page per person. Server-rendered, no script; only
 * the default (`production`) archive. Every page counts against the chat-log API's budget per
 * client; errors are the console's HTML error page.
 */
export async function ircReaderPages(app: FastifyInstance, opts: IrcReaderOptions) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { archive, store } = opts;
  const source = DEFAULT_IRC_SOURCE;
  const limiter = sharedRateLimit(app, 'irc', opts.rateLimitMax);
  const config = { auth: 'public' as const };
  app.setErrorHandler((error, request, reply) => sendErrorPage(request, reply, normalizeError(error, request)));

  const userOf = (request: FastifyRequest) => request.server.sessionUser(request).catch(() => null);
  const page = async (request: FastifyRequest, reply: FastifyReply, title: string, body: SafeHtml) =>
    sendPage(reply, { title, body, user: await userOf(request), active: 'irc' });

  const networkNamed = async (networkName: string) => {
    const network = await store.network(source, networkName);
    if (!network) throw notFound(`There is no network “${networkName}” in the archive.`);
    return network;
  };
  const channelNamed = async (networkName: string, channelName: string) => {
    const network = await networkNamed(networkName);
    const channel = await store.channel(network.id, channelName);
    if (!channel) throw notFound(`There is no channel “${channelName}” on ${network.name}.`);
    return { network, channel };
  };

  r.get('/irc', { schema: hidden, config, onRequest: limiter }, async (request, reply) =>
    page(request, reply, 'Chat logs', networksView(await store.networks(source))),
  );

  r.get('/irc/net/:network', { schema: { ...hidden, params: z.object({ network: name }) }, config, onRequest: limiter }, async (request, reply) => {
    const network = await networkNamed(request.params.network);
    return page(request, reply, `${network.name} · Chat logs`, channelsView(network, await archive.channels(source, network.id)));
  });

  r.get(
    '/irc/net/:network/:channel',
    {
      schema: {
        ...hidden,
        params: z.object({ network: name, channel: name }),
        querystring: z.object({
          year: optional(
            z
              .string()
              .regex(/^\d{4}$/, { error: 'must be a year YYYY' })
              .refine((y) => isArchiveYear(Number(y)), { error: `must be a year of the archive's days, ${ARCHIVE_RANGE_TEXT}` }),
          ),
        }),
      },
      config,
      onRequest: limiter,
    },
    async (request, reply) => {
      const { network, channel } = await channelNamed(request.params.network, request.params.channel);
      const years = await store.channelYears(channel.id);
      const year = request.query.year ? Number(request.query.year) : (years.at(-1) ?? new Date().getUTCFullYear());
      const days = await store.channelDays(channel.id, year);
      return page(request, reply, `${channel.name} ${year} · ${network.name}`, calendarView({ network, channel, year, years, days }));
    },
  );

  r.get(
    '/irc/net/:network/:channel/:day',
    {
      schema: {
        ...hidden,
        params: z.object({ network: name, channel: name, day: z.string().max(10) }),
        querystring: z.object({
          all: optional(z.enum(['0', '1'], { error: 'must be 0 or 1' })),
          page: optional(z.string().regex(/^[1-9]\d{0,5}$/, { error: 'must be a page number' })),
          at: optional(z.string().regex(/^[1-9]\d{0,18}$/, { error: 'must be a line id' })),
        }),
      },
      config,
      onRequest: limiter,
    },
    async (request, reply) => {
      const { day } = request.params;
      if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || !isValidDate(day)) throw notFound(`“${day}” is not a day (YYYY-MM-DD).`);
      if (!isArchiveDay(day)) throw notFound(`The archive holds days from ${ARCHIVE_RANGE_TEXT}; “${day}” is not one of them.`);
      const { network, channel } = await channelNamed(request.params.network, request.params.channel);
      const all = request.query.all === '1';
      const types = all ? null : IRC_EVENT_TYPES.filter((t) => !PRESENCE.has(t));
      // `at` (links from search results and nick pages): the page of the day that holds that line.
      const before = request.query.at && !request.query.page ? await store.rowsBefore(channel.id, day, Number(request.query.at), types) : null;
      const pageNo = before !== null ? Math.floor(before / DAY_PAGE) + 1 : Number(request.query.page ?? 1);
      const search: LogSearch = {
        ...toSearch({ channel_id: String(channel.id), date: day }),
        includeNetsplit: true,
        bulkNetsplit: true,
        eventTypes: types,
        limit: DAY_PAGE,
        offset: (pageNo - 1) * DAY_PAGE,
      };
      const [rows, around] = await Promise.all([archive.search(search), store.aroundDay(channel.id, day)]);
      if (!around.has) throw notFound(`${channel.name} has no log for ${day}.`);
      if (pageNo > 1 && !rows.results.length) throw notFound(`${channel.name} on ${day} has no page ${pageNo}.`);
      return page(
        request,
        reply,
        `${channel.name} ${day} · ${network.name}`,
        dayView({ network, channel, day, all, page: pageNo, pages: Math.max(1, Math.ceil(rows.total / DAY_PAGE)), rows: rows.results, around }),
      );
    },
  );

  r.get('/irc/search', { schema: { ...hidden, querystring: searchQuery }, config, onRequest: limiter }, async (request, reply) => {
    const form = request.query;
    const networks = await archive.networks(source);
    const asked = Boolean(form.q || form.nick);
    let result: { total: number; results: LogRow[]; search: LogSearch } | null = null;
    let error: string | null = null;
    if (asked) {
      try {
        const search = toSearch({ ...(form as LogsQuery), source, limit: String(SEARCH_PAGE) });
        const found = await archive.search(search);
        result = { total: found.total, results: found.results, search };
      } catch (err) {
        const e = normalizeError(err, request);
        if (e.status !== 422) throw err;
        error = e.message;
        void reply.code(422);
      }
    }
    return page(request, reply, form.q ? `Search: ${form.q}` : 'Search chat logs', searchView({ form, networks, result, error, asked }));
  });

  r.get(
    '/irc/nick/:nick',
    {
      schema: {
        ...hidden,
        params: z.object({ nick: safeString({ error: 'must be text' }).min(1).max(64) }),
        querystring: z.object({ network: optional(name) }),
      },
      config,
      onRequest: limiter,
    },
    async (request, reply) => {
      const network = request.query.network ? await networkNamed(request.query.network) : null;
      const networks = await archive.networks(source);
      const base = toSearch({ nick: request.params.nick, ...(network ? { network_id: String(network.id) } : {}) });
      const networkIds = network ? [network.id] : networks.map((n) => n.id);
      const profile = await archive.nickProfile(base);
      if (!profile) throw notFound(`Nobody called “${request.params.nick}” is in the archive${network ? ` of ${network.name}` : ''}.`);
      const keys = await archive.aliases.resolve(request.params.nick, networkIds);
      const [months, recent] = await Promise.all([
        store.nickMonths(networkIds, keys),
        archive.search({ ...base, eventTypes: ['PRIVMSG', 'ACTION'], order: 'desc', limit: 10 }),
      ]);
      const networkNames = new Map(networks.map((n) => [n.id, n.name]));
      return page(request, reply, `${profile.nick} · Chat logs`, nickView({ profile, network, months, recent: recent.results, networkNames }));
    },
  );
}
