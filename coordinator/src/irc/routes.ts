import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { safeString } from '@sonar/shared';
import { ARCHIVE_FIRST_DAY, ARCHIVE_LAST_DAY } from './archive-dates.js';
import { DEFAULT_IRC_SOURCE, IRC_SOURCES } from './event-store.js';
import type { IrcArchiveService, LogSearch } from './archive-service.js';
import { isValidDate } from './parsers/common.js';
import { AppError } from '../http/errors.js';
import { sharedRateLimit } from '../http/rate-limits.js';
import { IRC_EVENT_TYPES } from './parsers/types.js';
import { parseQuery, parseTermList, termProblem, uniqueTerms, type SearchTerm } from './search-terms.js';
import { presentLogPage, presentDates } from './presenter.js';

const tags = ['chat-log'];

/** Every value arrives as one string; a repeated parameter is an error naming it. */
const one = (_name: string, what: string) => z.string({ error: `give one value, ${what}` });

const intParam = (name: string, min: number, max: number) =>
  one(name, `an integer from ${min} to ${max}`)
    .regex(/^\d{1,10}$/, { error: `must be an integer from ${min} to ${max}` })
    .refine((v) => Number(v) >= min && Number(v) <= max, { error: `must be an integer from ${min} to ${max}` });

const idParam = (name: string) => intParam(name, 1, 2_147_483_647);

const boolParam = (name: string) => one(name, '1/0 or true/false').regex(/^(1|0|true|false|yes|no|on|off)$/i, { error: 'must be 1/0 or true/false' });

/** The days a time filter may name: the archive's days (archive-dates.ts), the importer's and the live logger's rule too. */
const FIRST_DAY = ARCHIVE_FIRST_DAY;
const LAST_DAY = ARCHIVE_LAST_DAY;
const dateParam = (name: string) =>
  one(name, 'a date YYYY-MM-DD')
    .refine(isValidDate, { error: 'must be a date YYYY-MM-DD' })
    .refine((v) => v >= FIRST_DAY && v <= LAST_DAY, {
      error: `must be a day from ${FIRST_DAY} to ${LAST_DAY} (a day's range ends at the next midnight, and there is no year 0)`,
    });

const DATETIME = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2})$/;
const datetimeParam = (name: string) =>
  one(name, 'a date-time YYYY-MM-DD HH:MM:SS')
    .refine(
      (v) => {
        const m = DATETIME.exec(v);
        return Boolean(m && isValidDate(m[1]!) && +m[2]! < 24 && +m[3]! < 60 && +m[4]! < 60);
      },
      { error: 'must be a date-time YYYY-MM-DD HH:MM:SS (UTC)' },
    )
    .refine((v) => v.slice(0, 10) >= FIRST_DAY, { error: `must be from ${FIRST_DAY} 00:00:00 (there is no year 0)` });

const sourceParam = z
  .enum(IRC_SOURCES, { error: `must be ${IRC_SOURCES.join(' or ')}` })
  .optional()
  .describe('`production` (default) or `sandbox`: two separate archives');

const textParam = (_name: string, max: number) => safeString({ error: 'give one value, text' }).max(max, { error: `must be at most ${max} characters` });

export const logsQuery = z.object({
  network_id: idParam('network_id').optional().describe('Filter by network'),
  channel_id: idParam('channel_id').optional().describe('Filter by channel'),
  q: textParam('q', 500)
    .optional()
    .describe('Free text over message, nick, channel, target and to_nick: words, `+word`, `-word`, `"quoted phrases"`, `prefix*`, `*substring`'),
  include_terms: textParam('include_terms', 500).optional().describe('Space- or comma-separated terms that must all match'),
  exclude_terms: textParam('exclude_terms', 500).optional().describe('Space- or comma-separated terms; matching rows are left out'),
  nick: textParam('nick', 64).optional().describe('Nick or person (all their known aliases)'),
  recipient: textParam('recipient', 64).optional().describe('Exact nick a row is addressed to: target or to_nick'),
  private_only: boolParam('private_only').optional().describe('Only private-message rows'),
  date: dateParam('date').optional().describe('Exact UTC day; wins over the other time filters'),
  datetime_from: datetimeParam('datetime_from').optional().describe('UTC, inclusive; used when `date` is absent'),
  datetime_to: datetimeParam('datetime_to').optional().describe('UTC, inclusive'),
  date_from: dateParam('date_from').optional().describe('UTC day, inclusive; used when neither `date` nor a datetime bound is given'),
  date_to: dateParam('date_to').optional().describe('UTC day, inclusive'),
  limit: intParam('limit', 1, 1000).optional().describe('1 to 1000, default 100'),
  offset: intParam('offset', 0, 100_000_000).optional().describe('At least 0, default 0'),
  source: sourceParam,
  include_netsplit: boolParam('include_netsplit').optional().describe('Include server split and merge rows; default false'),
  bulk_netsplit: boolParam('bulk_netsplit').optional().describe('With include_netsplit=1, one row per split or merge burst; default true'),
  aggregate: z.enum(['dates'], { error: 'must be dates' }).optional().describe('`dates`: the number of distinct days and their span instead of rows'),
  event_type: one('event_type', 'comma-separated event types')
    .refine((v) => v.split(',').every((t) => (IRC_EVENT_TYPES as readonly string[]).includes(t.trim().toUpperCase())), {
      error: `must be event types separated by commas: ${IRC_EVENT_TYPES.join(', ')}`,
    })
    .optional()
    .describe(`Only these event types, comma-separated (${IRC_EVENT_TYPES.join(', ')}); naming NETSPLIT or NETMERGE implies include_netsplit=1`),
  order: z
    .enum(['asc', 'desc'], { error: 'must be asc or desc' })
    .optional()
    .describe('`asc` (default): oldest first; `desc`: newest first (offset counts from the newest)'),
});
export type LogsQuery = z.infer<typeof logsQuery>;

const truthy = (v: string | undefined, dflt: boolean) => (v === undefined ? dflt : /^(1|true|yes|on)$/i.test(v));

/** Validated `/logs` parameters as the archive service's search (also the reader's search page). */
export function toSearch(q: LogsQuery): LogSearch {
  const parsed = parseQuery(q.q ?? '');
  const from = new Map<SearchTerm, string>();
  const tag = (terms: SearchTerm[], name: string) => {
    for (const t of terms) from.set(t, name);
    return terms;
  };
  const include = uniqueTerms([...tag(parsed.include, 'q'), ...tag(parseTermList(q.include_terms ?? ''), 'include_terms')]);
  const exclude = uniqueTerms([...tag(parsed.exclude, 'q'), ...tag(parseTermList(q.exclude_terms ?? ''), 'exclude_terms')]);
  const problem = termProblem(include, exclude, from);
  if (problem) throw new AppError('validation_failed', problem);
  const eventTypes = q.event_type ? [...new Set(q.event_type.split(',').map((t) => t.trim().toUpperCase()))] : null;
  const namesSplits = eventTypes?.some((t) => t === 'NETSPLIT' || t === 'NETMERGE') ?? false;
  return {
    source: q.source ?? DEFAULT_IRC_SOURCE,
    networkId: q.network_id !== undefined ? Number(q.network_id) : null,
    channelId: q.channel_id !== undefined ? Number(q.channel_id) : null,
    include,
    exclude,
    nick: q.nick?.trim() || null,
    recipient: q.recipient?.trim() || null,
    privateOnly: truthy(q.private_only, false),
    date: q.date ?? null,
    datetimeFrom: q.datetime_from?.replace('T', ' ') ?? null,
    datetimeTo: q.datetime_to?.replace('T', ' ') ?? null,
    dateFrom: q.date_from ?? null,
    dateTo: q.date_to ?? null,
    limit: q.limit !== undefined ? Number(q.limit) : 100,
    offset: q.offset !== undefined ? Number(q.offset) : 0,
    includeNetsplit: truthy(q.include_netsplit, namesSplits),
    bulkNetsplit: truthy(q.bulk_netsplit, true),
    eventTypes,
    order: q.order ?? 'asc',
  };
}

const sourceQuery = z.object({ source: sourceParam });
const channelsParams = z.object({ networkId: idParam('networkId').describe('Network id (from /networks)') });

const errorBody = z.object({ success: z.literal(false), error: z.string() });
const errors = { 422: errorBody, 429: errorBody, 500: errorBody, 503: errorBody };

const network = z.object({ id: z.number().int(), name: z.string() });
const channel = z.object({
  id: z.number().int(),
  name: z.string(),
  first_date: z.string().nullable(),
  last_date: z.string().nullable(),
  event_count: z.number().int(),
});
const logRow = z.object({
  id: z.number().int(),
  event_type: z.string(),
  occurred_at: z.string(),
  nick: z.string().nullable(),
  message_text: z.string().nullable(),
  target: z.string().nullable(),
  to_nick: z.string().nullable(),
  channel_id: z.number().int(),
  channel_name: z.string(),
  network_id: z.number().int(),
  netsplit_count: z.number().int().optional(),
  netsplit_nicks: z.array(z.string()).optional(),
  netsplit_last_at: z.string().optional(),
});
const nickProfile = z
  .object({
    nick: z.string(),
    aliases: z.array(z.string()),
    first_seen: z.string(),
    last_seen: z.string().describe('Last row of any kind by one of these nicks (message, join, part, quit, nick change, …)'),
    last_message: z.string().nullable().describe('Last PRIVMSG or ACTION by one of these nicks; null when they never spoke'),
    message_count: z.number().int(),
    event_count: z.number().int(),
    networks: z.array(network),
  })
  .nullable();
const logsResponse = z.union([
  z.object({
    success: z.literal(true),
    source: z.string(),
    total: z.number().int(),
    limit: z.number().int(),
    offset: z.number().int(),
    results: z.array(logRow),
    nick_profile: nickProfile,
  }),
  z.object({
    success: z.literal(true),
    source: z.string(),
    aggregate: z.literal('dates'),
    total: z.number().int(),
    date_count: z.number().int(),
    first_date: z.string().nullable(),
    last_date: z.string().nullable(),
    span_days: z.number().int(),
    nick_profile: nickProfile,
  }),
]);

export interface IrcRoutesOptions {
  archive: IrcArchiveService;
  /** Requests per minute per client. */
  rateLimitMax: number;
}

/** URL prefixes of the chat-log API: the current one and the legacy alias. */
export const IRC_API_PREFIXES = ['/irc/api', '/api/irclog'] as const;

/**
 * Public read API. The same handlers answer under `/irc/api` and, for old clients, under the
 * legacy `/api/irclog` prefix with a Deprecation header pointing at the new path.
 */
export async function ircRoutes(app: FastifyInstance, opts: IrcRoutesOptions) {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { archive } = opts;
  // One budget per client across every chat-log route (and both prefixes): a route-level
  // `config.rateLimit` would count each route separately.
  const limiter = sharedRateLimit(app, 'irc', opts.rateLimitMax);

  for (const prefix of IRC_API_PREFIXES) {
    const legacy = prefix === '/api/irclog';
    const deprecate = (reply: FastifyReply, path: string) => {
      if (legacy) void reply.header('deprecation', 'true').header('link', `</irc/api${path}>; rel="successor-version"`);
    };
    const common = { tags, deprecated: legacy, ...(legacy ? { description: `Legacy alias of /irc/api; answers with a Deprecation header.` } : {}) };

    r.get(
      `${prefix}/networks`,
      {
        config: { auth: 'public' },
        onRequest: limiter,
        schema: {
          ...common,
          summary: 'Networks of an archive',
          querystring: sourceQuery,
          response: { 200: z.object({ success: z.literal(true), networks: z.array(network), source: z.string() }), ...errors },
        },
      },
      async (req, reply) => {
        deprecate(reply, '/networks');
        const source = req.query.source ?? DEFAULT_IRC_SOURCE;
        return { success: true as const, networks: await archive.networks(source), source };
      },
    );

    r.get(
      `${prefix}/networks/:networkId/channels`,
      {
        config: { auth: 'public' },
        onRequest: limiter,
        schema: {
          ...common,
          summary: 'Channels of a network, with first/last event time (UTC) and event count',
          params: channelsParams,
          querystring: sourceQuery,
          response: { 200: z.object({ success: z.literal(true), channels: z.array(channel), source: z.string() }), ...errors },
        },
      },
      async (req, reply) => {
        deprecate(reply, `/networks/${req.params.networkId}/channels`);
        const source = req.query.source ?? DEFAULT_IRC_SOURCE;
        return { success: true as const, channels: await archive.channels(source, Number(req.params.networkId)), source };
      },
    );

    r.get(
      `${prefix}/logs`,
      {
        config: { auth: 'public' },
        onRequest: limiter,
        schema: {
          ...common,
          summary: 'Search log rows',
          description:
            'Rows in (occurred_at, id) order (`order=desc`: newest first); times are UTC. `nick_profile` describes the person the `nick` filter names, or is null. ' +
            'A search running longer than IRC_QUERY_TIMEOUT_MS (5 s) is stopped and answered 503.',
          querystring: logsQuery,
          response: { 200: logsResponse, ...errors },
        },
      },
      async (req, reply) => {
        deprecate(reply, '/logs');
        const search = toSearch(req.query);
        if (req.query.aggregate === 'dates') {
          const [dates, profile] = await Promise.all([archive.aggregateDates(search), archive.nickProfile(search)]);
          return presentDates(search, dates, profile);
        }
        return presentLogPage(search, await archive.search(search));
      },
    );
  }
}
