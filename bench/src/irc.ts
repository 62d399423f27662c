// Chat-log archive phases of bench/src/run.ts (`BENCH_ONLY=irc`), against the 10-million-row archive
// that `npm run bench:irc:generate` builds once in the database sonar_bench_irc (bench/src/irc-generate.ts).
// The coordinator runs in this process on that database (IRC_API_RATE_LIMIT_MAX raised so the
// per-client limit never answers 429).
//
// 1. import throughput: ZNC log files (IRC_BENCH_IMPORT_LINES lines, 200,000 by default, over a few
//    channel-days) written to a temp folder and imported with the real IrcImportService into a
//    network of its own; then imported again (every line a duplicate). The network is deleted
//    afterwards and irc_events vacuumed, so the archive stays at its generated size.
// 2. query latency: for each query shape, IRC_BENCH_QUERIES (60) distinct seeded queries of
//    GET /irc/api/logs, one at a time after IRC_BENCH_WARMUP (5) others, over real HTTP; every
//    answer must be 200 with success true.
// 3. reader pages: the same for the /irc pages (day, calendar, nick, search); every answer must be
//    a 200 page.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { loadConfig } from '../../coordinator/dist/config.js';
import { IrcImportService } from '../../coordinator/dist/irc/import-service.js';
import { startCoordinator, type RunningCoordinator } from '../../coordinator/dist/service.js';
import {
  BENCH_IRC_DATABASE,
  HOUR_WEIGHTS,
  QUIT_REASONS,
  benchDatabaseUrl,
  englishCount,
  makeNicks,
  readBenchState,
  vocabulary,
  zipf,
  type FinishedBenchState,
} from './irc-generate.js';
import { coordinatorEnv, errorText, log, ms, percentile, rng, secs, type Fail, type Row } from './lib.js';

const int = (name: string, fallback: number): number => {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v > 0 ? v : fallback;
};
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
/** The goal from the issue: p95 under 100 ms for every query shape. */
const TARGET_P95_MS = 100;
/** The reader pages' goal: p95 under 200 ms for a whole page (its queries and the HTML). */
const TARGET_READER_P95_MS = 200;
/** The import floor from the issue: lines per second into the full archive. */
const TARGET_IMPORT_LINES_PER_S = 4000;
const IMPORT_NETWORK_PREFIX = 'bench-import-';

/** The PostgreSQL server holding sonar_bench_irc: BENCH_DATABASE_URL, else the bench's admin URL. */
export function ircServerUrl(pgAdminUrl: string): string {
  return process.env.BENCH_DATABASE_URL || pgAdminUrl;
}

/** The generator's record of a finished run, or null (no database, or an unfinished one). */
export async function ircBenchState(pgAdminUrl: string): Promise<FinishedBenchState | null> {
  const state = await readBenchState(ircServerUrl(pgAdminUrl));
  return state?.complete ? state : null;
}

export const IRC_GENERATE_HINT = `run \`npm run bench:irc:generate\` once (about 20 min on 2 cores, 9 GiB; IRC_BENCH_ROWS to change the size), then \`BENCH_ONLY=irc npm run bench\``;

// ---- ZNC files for the import phase ---------------------------------------------------------------

const KICK_REASONS = ['spam', 'flood', 'please stay on topic', 'no bots'];
const two = (n: number) => String(n).padStart(2, '0');
const clock = (s: number) => `${two(Math.floor(s / 3600))}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}`;

/**
 * ZNC logs `#chan_YYYYMMDD.log` of about 5,000 lines each (four channels, as many days as needed)
 * with the generator's word and nick distributions: messages (some addressed `nick: …`, some with
 * URLs or code), actions, notices, joins/parts/quits, nick changes, modes, topics, kicks, and a
 * netsplit per file (20-60 quits with one split reason, most rejoining minutes later).
 */
function writeZncFiles(dir: string, totalLines: number, seed: number): { files: string[]; lines: number } {
  const rand = rng(seed ^ 0x1237);
  const words = vocabulary(seed);
  const english = englishCount(seed);
  const { nicks, alts } = makeNicks(rand, 800);
  const channels = ['#bench-general', '#bench-dev', '#bench-help', '#bench-offtopic'];
  const perFile = 5000;
  const hourCum = HOUR_WEIGHTS.map(
    (
      (acc) => (w: number) =>
        (acc += w)
    )(0),
  );
  // zipf(rand, n) is a rank in 1..n: every index below is in range.
  const say = (n: number) => Array.from({ length: n }, () => words[zipf(rand, words.length) - 1]!).join(' ');
  const tech = () => words[english + zipf(rand, words.length - english) - 1]!;
  const nickOf = (i: number) => nicks[i]!;
  const host = (nick: string) => `~${nick.toLowerCase().replace(/[^a-z0-9]/g, '') || 'u'}@user/${nick.replace(/[^A-Za-z0-9]/g, '')}`;
  const files: string[] = [];
  let written = 0;
  for (let f = 0; written < totalLines; f++) {
    const channel = channels[f % channels.length];
    const day = new Date(Date.UTC(2025, 1, 1) + Math.floor(f / channels.length) * 86_400_000).toISOString().slice(0, 10);
    const n = Math.min(perFile, totalLines - written);
    const shift = Math.floor(rand() * nicks.length);
    const nickAt = () => (zipf(rand, nicks.length) + (rand() < 0.5 ? 0 : shift)) % nicks.length;
    const events: Array<{ at: number; text: string; k?: number }> = [];
    // The netsplit: quits within seconds, then most of the same nicks rejoin 2-15 minutes later.
    const q = n >= 200 ? 20 + Math.floor(rand() * 41) : 0;
    const m = Math.round(q * 0.8);
    const splitAt = 3600 + Math.floor(rand() * 70_000);
    const split = [...new Set(Array.from({ length: q * 2 }, nickAt))].slice(0, q);
    split.forEach((i, k) => events.push({ at: splitAt + Math.floor(k / 8), text: `*** Quits: ${nickOf(i)} (${host(nickOf(i))}) (*.net *.split)` }));
    const mergeAt = splitAt + 120 + Math.floor(rand() * 780);
    split.slice(0, m).forEach((i, k) => events.push({ at: mergeAt + Math.floor(k / 6), text: `*** Joins: ${nickOf(i)} (${host(nickOf(i))})` }));
    while (events.length < n) {
      const r = rand() * hourCum[23]!;
      const at = hourCum.findIndex((c) => r < c) * 3600 + Math.floor(rand() * 3600);
      const i = nickAt();
      const nick = rand() < 0.05 ? alts[i]! : nickOf(i);
      const other = nickOf(nickAt());
      const t = rand() * 100;
      let text;
      if (t < 71) {
        const extra = rand();
        text = `<${nick}> ${rand() < 0.12 && other !== nick ? `${other}: ` : ''}${say(1 + Math.floor(24 * rand() ** 2))}${
          extra < 0.03 ? ` https://github.com/${tech()}/${tech()}` : extra < 0.065 ? ` ${tech()}_${tech()}()` : ''
        }`;
      } else if (t < 74) text = `* ${nick} ${say(1 + Math.floor(8 * rand()))}`;
      else if (t < 76) text = `-${nick}- ${say(1 + Math.floor(12 * rand()))}`;
      else if (t < 85) text = `*** Joins: ${nick} (${host(nick)})`;
      else if (t < 89)
        text = `*** Parts: ${nick} (${host(nick)}) (${rand() < 0.6 ? '' : 'Leaving'})`; // ZNC writes `()` for no reason
      else if (t < 96) text = `*** Quits: ${nick} (${host(nick)}) (${QUIT_REASONS[Math.floor(rand() * QUIT_REASONS.length)]})`;
      else if (t < 98) text = rand() < 0.5 ? `*** ${nicks[i]} is now known as ${alts[i]}` : `*** ${alts[i]} is now known as ${nicks[i]}`;
      else if (t < 99.2) text = `*** ChanServ sets mode: ${rand() < 0.7 ? '+o' : '+v'} ${other}`;
      else if (t < 99.5) text = `*** ${nick} changes topic to '${say(8)} | https://${tech()}.org/'`;
      else text = `*** ${other} was kicked by ${nick} (${KICK_REASONS[Math.floor(rand() * KICK_REASONS.length)]})`;
      events.push({ at, text });
    }
    events.forEach((e, k) => (e.k = k));
    events.sort((a, b) => a.at - b.at || a.k! - b.k!);
    const file = path.join(dir, `${channel}_${day.replace(/-/g, '')}.log`);
    writeFileSync(file, events.map((e) => `[${clock(e.at)}] ${e.text}\n`).join(''));
    files.push(file);
    written += events.length;
  }
  return { files, lines: written };
}

// ---- query sets -----------------------------------------------------------------------------------

/** Seeded draws of `n` distinct items from `make()` (gives up after many repeats). */
function distinct<T>(n: number, make: () => T | null | undefined | false | 0 | ''): T[] {
  const out = new Map<string, T>();
  for (let tries = 0; out.size < n && tries < n * 200; tries++) {
    const v = make();
    if (v) out.set(JSON.stringify(v), v);
  }
  return [...out.values()];
}

/**
 * The query shapes: for each, warm-up + measured parameter sets, drawn with a fixed seed from the
 * generated vocabulary and from the archive itself (active nicks, big channels, real word pairs).
 */
interface QueryShape {
  shape: string;
  about: string;
  note?: string;
  params: Array<Record<string, string>>;
}

async function querySets(db: pg.Client, state: FinishedBenchState, count: number): Promise<QueryShape[]> {
  const rand = rng(4242);
  const words = vocabulary(state.seed);
  const plain = (w: string) => /^[a-z]+$/.test(w);
  const logUniform = (lo: number, hi: number) => Math.floor(Math.exp(Math.log(lo) + rand() * (Math.log(hi) - Math.log(lo))));
  const wordIn = (lo: number, hi: number) => {
    const w = words[logUniform(lo, hi) - 1] ?? '';
    return plain(w) ? w : null;
  };
  const q = async <T extends pg.QueryResultRow>(sql: string, params?: unknown[]) => (await db.query<T>(sql, params)).rows;

  const nets = await q<{ id: number; name: string; first_at: Date; last_at: Date; events: string }>(
    `select n.id, n.name, min(c.first_at) as first_at, max(c.last_at) as last_at, sum(c.event_count)::bigint as events
       from irc_networks n join irc_channels c on c.network_id = n.id
      where n.source = 'production' and n.name not like $1 group by n.id, n.name order by events desc`,
    [`${IMPORT_NETWORK_PREFIX}%`],
  );
  const big = await q<{ id: number; name: string; network: string; event_count: number }>(
    `select c.id, c.name, n.name as network, c.event_count from irc_channels c join irc_networks n on n.id = c.network_id
      where n.source = 'production' order by c.event_count desc limit 3`,
  );
  const nicks = await q<{ nick: string; network_id: number; message_count: number }>(
    `select k.nick, k.network_id, k.message_count from irc_nicks k join irc_networks n on n.id = k.network_id
      where n.source = 'production' and k.nick_key <> 'chanserv' and k.nick_key !~ '^guest[0-9]+$'
      order by k.message_count desc limit 500`,
  );
  // Real adjacent word pairs: messages at seeded ids, pairs past the `nick:` prefix where at least
  // one word is outside the 100 most common (a phrase of two stop words would match everything).
  const [maxRow] = await q<{ max: string | null }>('select max(id) as max from irc_events');
  const max = maxRow?.max;
  const sampleIds = Array.from({ length: count * 40 }, () => 1 + Math.floor(rand() * Number(max)));
  const messages = await q<{ message_text: string }>(
    `select message_text from irc_events where id = any($1::bigint[]) and event_type = 'PRIVMSG' order by id`,
    [sampleIds],
  );
  const rank = new Map(words.map((w, i) => [w, i + 1]));
  const pairs: string[] = [];
  for (const { message_text: text } of messages) {
    const tokens = text.replace(/^\S+: /, '').split(' ');
    for (let i = 0; i + 1 < tokens.length; i++) {
      const [a, b] = [tokens[i]!, tokens[i + 1]!];
      if (plain(a) && plain(b) && a !== b && Math.max(rank.get(a) ?? 0, rank.get(b) ?? 0) > 100) {
        pairs.push(`${a} ${b}`);
        break;
      }
    }
  }

  const day = (ms: number | Date) => new Date(ms).toISOString().slice(0, 10);
  const n = count;
  return [
    {
      shape: 'single word',
      about: 'q=<word>, vocabulary ranks 200-5000',
      params: distinct(n, () => {
        const w = wordIn(200, 5000);
        return w && { q: w };
      }),
    },
    {
      shape: 'phrase',
      about: 'q="<w1> <w2>", adjacent words from stored messages',
      params: distinct(n, () => pairs.length && { q: `"${pairs[Math.floor(rand() * pairs.length)]}"` }),
    },
    {
      shape: 'nick filter',
      about: 'nick=<one of the 500 most active>, network_id',
      params: distinct(n, () => {
        const k = nicks[Math.min(nicks.length - 1, logUniform(5, nicks.length))];
        return k && { nick: k.nick, network_id: String(k.network_id) };
      }),
    },
    {
      shape: 'date range',
      about: 'network_id + date_from/date_to, 1-30 days',
      params: distinct(n, () => {
        const net = nets[Math.floor(rand() * nets.length)];
        if (!net) return null;
        const from = Date.parse(`${day(new Date(net.first_at))}T00:00:00Z`);
        const to = Date.parse(`${day(new Date(net.last_at))}T00:00:00Z`);
        const len = 1 + Math.floor(rand() * 30);
        const start = from + Math.floor(rand() * Math.max(1, (to - from) / 86_400_000 - len)) * 86_400_000;
        return { network_id: String(net.id), date_from: day(start), date_to: day(start + (len - 1) * 86_400_000) };
      }),
    },
    {
      shape: 'exclusion',
      about: 'q=<word> -<common word>, ranks 100-2000 minus ranks 1-50',
      params: distinct(n, () => {
        const w = wordIn(100, 2000);
        const x = wordIn(1, 50);
        return w && x && w !== x && { q: `${w} -${x}` };
      }),
    },
    {
      shape: 'deep offset',
      about: 'channel_id of the 3 biggest channels, offset 10,000-100,000',
      note: `channels ${big.map((c) => `${c.network}/${c.name} (${fmt(c.event_count)} rows)`).join(', ')}`,
      params: distinct(n, () => {
        const c = big[Math.floor(rand() * big.length)];
        return c && { channel_id: String(c.id), offset: String(10_000 + Math.floor(rand() * 90_001)) };
      }),
    },
    {
      shape: 'aggregate=dates',
      about: 'aggregate=dates&q=<word>, ranks 200-5000',
      params: distinct(n, () => {
        const w = wordIn(200, 5000);
        return w && { aggregate: 'dates', q: w };
      }),
    },
  ];
}

/**
 * The reader pages (/irc): per shape, distinct page URLs drawn with a fixed seed from the archive:
 * days of the 3 biggest channels (with joins and parts shown, the longest form), calendar years of
 * any channel, pages of the 500 most active nicks, and one-word searches.
 */
async function readerSets(db: pg.Client, count: number): Promise<Array<{ shape: string; about: string; urls: string[] }>> {
  const rand = rng(777);
  const q = async <T extends pg.QueryResultRow>(sql: string, params?: unknown[]) => (await db.query<T>(sql, params)).rows;
  const enc = encodeURIComponent;
  const chan = (network: string, channel: string) => `/irc/net/${enc(network)}/${enc(channel)}`;
  const days = await q<{ network: string; channel: string; day: string; events: string }>(
    `select n.name as network, c.name as channel, to_char(d.day, 'YYYY-MM-DD') as day, d.events
       from irc_channel_days d join irc_channels c on c.id = d.channel_id join irc_networks n on n.id = c.network_id
      where d.channel_id in (select c2.id from irc_channels c2 join irc_networks n2 on n2.id = c2.network_id
                              where n2.source = 'production' and n2.name not like $1 order by c2.event_count desc limit 3)`,
    [`${IMPORT_NETWORK_PREFIX}%`],
  );
  const years = await q<{ network: string; channel: string; year: string }>(
    `select distinct n.name as network, c.name as channel, extract(year from d.day)::int::text as year
       from irc_channel_days d join irc_channels c on c.id = d.channel_id join irc_networks n on n.id = c.network_id
      where n.source = 'production' and n.name not like $1`,
    [`${IMPORT_NETWORK_PREFIX}%`],
  );
  const nicks = await q<{ nick: string; network: string }>(
    `select k.nick, n.name as network from irc_nicks k join irc_networks n on n.id = k.network_id
      where n.source = 'production' and k.nick_key <> 'chanserv' and k.nick_key !~ '^guest[0-9]+$' order by k.message_count desc limit 500`,
  );
  const words = await q<{ term: string }>(
    `select term from (select term, sum(n) as n from irc_term_months where term ~ '^[a-z]+$' group by term order by n desc limit 5000) t order by n desc offset 200`,
  );
  const pick = <T>(list: T[]) => list[Math.floor(rand() * list.length)];
  const maxEvents = Math.max(0, ...days.map((d) => Number(d.events)));
  return [
    {
      shape: 'day',
      about: `a day of one of the 3 biggest channels with joins and parts (?all=1; up to ${fmt(maxEvents)} rows a day)`,
      urls: distinct(count, () => {
        const d = pick(days);
        return d && `${chan(d.network, d.channel)}/${d.day}?all=1`;
      }),
    },
    {
      shape: 'calendar',
      about: 'a year of any channel (irc_channel_days)',
      urls: distinct(count, () => {
        const y = pick(years);
        return y && `${chan(y.network, y.channel)}?year=${y.year}`;
      }),
    },
    {
      shape: 'nick',
      about: 'a page of one of the 500 most active nicks: profile, last messages, activity per month',
      urls: distinct(count, () => {
        const k = pick(nicks);
        return k && `/irc/nick/${enc(k.nick)}?network=${enc(k.network)}`;
      }),
    },
    {
      shape: 'search',
      about: 'q=<word> (stored terms ranked 200-5000), 50 results with matches marked',
      urls: distinct(count, () => {
        const w = pick(words);
        return w && `/irc/search?q=${enc(w.term)}`;
      }),
    },
  ];
}

// ---- phases -----------------------------------------------------------------------------------------

export interface IrcContext {
  /** The bench's PostgreSQL admin URL (BENCH_DATABASE_URL overrides the server). */
  pgAdminUrl: string;
  redisUrl: string;
  redisPrefix: string;
  tmp: string;
  runId: string;
  row: Row;
  fail: Fail;
  /** Records a check's outcome (a false one fails the run). */
  check: (ok: boolean) => void;
  checkInterrupted: () => void;
}

export async function ircPhases(ctx: IrcContext): Promise<void> {
  const { row, fail, check, checkInterrupted } = ctx;
  const settings = {
    importLines: int('IRC_BENCH_IMPORT_LINES', 200_000),
    queries: int('IRC_BENCH_QUERIES', 60),
    warmup: int('IRC_BENCH_WARMUP', 5),
  };
  const base = ircServerUrl(ctx.pgAdminUrl);
  const state = await ircBenchState(ctx.pgAdminUrl);
  if (!state) {
    fail('IRC archive', new Error(`no generated database ${BENCH_IRC_DATABASE}: ${IRC_GENERATE_HINT}`));
    return;
  }
  const dbUrl = benchDatabaseUrl(base);
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  let svc: RunningCoordinator | null = null;
  const importNetwork = `${IMPORT_NETWORK_PREFIX}${ctx.runId}`;
  // `like` also takes networks an interrupted earlier run left (two IRC benches must not run at once).
  const dropImportNetworks = async (name = `${IMPORT_NETWORK_PREFIX}%`) => {
    const res = await db.query('delete from irc_networks where source = $1 and name like $2', ['production', name]);
    return res.rowCount;
  };
  try {
    // A run that was cut short may have left its import network behind.
    const stale = await dropImportNetworks();
    if (stale) log(`irc: removed ${stale} import network(s) left by an earlier run`);
    const info = (
      await db.query<{ events: string; channels: string; nicks: string; size: string; shared_buffers: string; table_size: string }>(
        `select (select sum(event_count) from irc_channels)::bigint as events, (select count(*) from irc_channels) as channels,
              (select count(*) from irc_nicks) as nicks, pg_database_size(current_database()) as size,
              current_setting('shared_buffers') as shared_buffers, pg_size_pretty(pg_table_size('irc_events')) as table_size`,
      )
    ).rows[0]!;
    row(
      'IRC archive',
      `${BENCH_IRC_DATABASE}: ${fmt(Number(info.events))} rows, ${info.channels} channels, ${fmt(Number(info.nicks))} nicks, ${(Number(info.size) / 2 ** 30).toFixed(2)} GiB; generated ${state.generatedAt.slice(0, 16).replace('T', ' ')} UTC in ${state.generateSeconds} s (seed ${state.seed}); irc_events heap ${info.table_size}; server shared_buffers ${info.shared_buffers}`,
    );

    log(`irc: starting the coordinator on ${BENCH_IRC_DATABASE} (pending migrations run now)`);
    const t = performance.now();
    const config = loadConfig(
      coordinatorEnv(
        { databaseUrl: dbUrl, redisUrl: ctx.redisUrl, redisPrefix: `${ctx.redisPrefix}irc:`, mediaDir: path.join(ctx.tmp, 'irc-media') },
        // Every query of the bench comes from one client address; the default 60/min would answer 429.
        { IRC_API_RATE_LIMIT_MAX: '1000000' },
      ),
    );
    svc = await startCoordinator(config);
    log(`irc: coordinator up in ${secs(performance.now() - t)}`);

    // ---- 1. import throughput ---------------------------------------------------------------------
    try {
      checkInterrupted();
      const dir = path.join(ctx.tmp, 'irc-import');
      mkdirSync(dir, { recursive: true });
      const g0 = performance.now();
      const { files, lines } = writeZncFiles(dir, settings.importLines, state.seed);
      log(`irc: wrote ${fmt(lines)} ZNC lines in ${files.length} files in ${secs(performance.now() - g0)}; importing as network ${importNetwork}`);
      const importer = new IrcImportService(svc.orm);
      const run = async () => {
        const s = performance.now();
        const counts = await importer.importPaths([dir], { network: importNetwork, source: 'production' });
        return { counts, ms: performance.now() - s };
      };
      const first = await run();
      log(`irc: import ${secs(first.ms)}: ${JSON.stringify({ ...first.counts, ignoredFiles: first.counts.ignoredFiles.length })}`);
      checkInterrupted();
      const again = await run();
      log(`irc: re-import ${secs(again.ms)}: ${JSON.stringify({ ...again.counts, ignoredFiles: again.counts.ignoredFiles.length })}`);
      const c1 = first.counts;
      const c2 = again.counts;
      const rate = (c1.lines / first.ms) * 1000;
      row(
        `IRC import (IrcImportService, ZNC files, format auto, into the ${fmt(state.rows)}-row archive)`,
        `${fmt(rate)} lines/s (${fmt(c1.lines)} lines in ${files.length} files, ${secs(first.ms)}; ${fmt(c1.inserted)} rows added); target ${fmt(TARGET_IMPORT_LINES_PER_S)} lines/s ${rate >= TARGET_IMPORT_LINES_PER_S ? 'MET' : 'MISSED'}`,
      );
      row(
        'IRC re-import of the same files (every line a duplicate)',
        `${fmt((c2.lines / again.ms) * 1000)} lines/s (${secs(again.ms)}; ${fmt(c2.inserted)} rows added)`,
      );
      const ok = c1.files === files.length && c1.lines === lines && c1.unparsed === 0 && c1.inserted === lines && c2.inserted === 0 && c2.lines === lines;
      check(ok);
      row(
        'IRC import check',
        `${ok ? 'PASS' : 'FAIL'}: first import ${fmt(c1.inserted)}/${fmt(lines)} lines added (${c1.unparsed} unparsed, ${c1.ignoredFiles.length} files ignored), re-import ${fmt(c2.inserted)} added`,
      );
      rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      fail('IRC import', err);
    }
    // Back to the generated archive: the import network goes (cascade) and the dead rows are vacuumed.
    try {
      const s = performance.now();
      await dropImportNetworks(importNetwork);
      const d = performance.now() - s;
      await db.query('vacuum irc_events, irc_channels, irc_nicks, irc_nick_links, irc_term_months, irc_channel_days, irc_import_batches');
      row('IRC import cleanup (delete the import network, vacuum)', `${secs(performance.now() - s)} (delete ${secs(d)})`);
    } catch (err) {
      fail('IRC import cleanup', err);
    }

    // The import, its cleanup and whatever ran before may have pushed the archive out of the OS page
    // cache; a server that has been serving it has its table and search index there. Read both once
    // (pg_prewarm 'read': through the OS cache, PostgreSQL's shared_buffers stay at the default).
    try {
      const s = performance.now();
      await db.query('create extension if not exists pg_prewarm');
      const pages = await db.query<{ heap: string; gin: string }>(
        `select pg_prewarm('irc_events', 'read') as heap, pg_prewarm('irc_events_search_idx', 'read') as gin`,
      );
      row(
        'IRC OS page cache warm-up (pg_prewarm read of irc_events and its search index)',
        `${secs(performance.now() - s)} (${fmt(Number(pages.rows[0]!.heap) + Number(pages.rows[0]!.gin))} pages read)`,
      );
    } catch (err) {
      row('IRC OS page cache warm-up', `not done (${errorText(err)}): the query times below include reads from disk`);
    }

    // ---- 2. query latency over HTTP -----------------------------------------------------------------
    try {
      checkInterrupted();
      const sets = await querySets(db, state, settings.queries + settings.warmup);
      const running = svc;
      const get = async (params: Record<string, string>) => {
        const qs = new URLSearchParams(params).toString();
        const s = performance.now();
        const res = await fetch(`${running.url}/irc/api/logs?${qs}`);
        const body = (await res.json().catch(() => null)) as { success?: boolean; total?: number | string } | null;
        const took = performance.now() - s;
        if (res.status !== 200 || body?.success !== true) throw new Error(`GET /irc/api/logs?${qs}: HTTP ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
        return { ms: took, total: Number(body.total) };
      };
      let answered = 0;
      let allMet = true;
      for (const set of sets) {
        checkInterrupted();
        if (set.params.length < settings.queries + settings.warmup) {
          throw new Error(`${set.shape}: only ${set.params.length} distinct queries could be drawn from the archive`);
        }
        const warm = set.params.slice(0, settings.warmup);
        const measured = set.params.slice(settings.warmup, settings.warmup + settings.queries);
        for (const p of warm) await get(p);
        const times = [];
        const totals = [];
        const s = performance.now();
        for (const p of measured) {
          const r = await get(p);
          times.push(r.ms);
          totals.push(r.total);
          answered += 1;
        }
        const p95 = percentile(times, 95);
        const met = p95 < TARGET_P95_MS;
        if (!met) allMet = false;
        log(
          `irc: ${set.shape}: p50 ${ms(percentile(times, 50))}, p95 ${ms(p95)}, p99 ${ms(percentile(times, 99))} over ${times.length} queries in ${secs(performance.now() - s)}${set.note ? `; ${set.note}` : ''}`,
        );
        row(
          `IRC query: ${set.shape} (${set.about})`,
          `p50 ${ms(percentile(times, 50))} / p95 ${ms(p95)} / p99 ${ms(percentile(times, 99))}; mean total ${fmt(totals.reduce((a, b) => a + b, 0) / totals.length)} rows (max ${fmt(Math.max(...totals))}); p95 target ${TARGET_P95_MS} ms ${met ? 'MET' : 'MISSED'}`,
        );
      }
      row(
        'IRC query check',
        `PASS: ${answered} measured queries (${settings.queries} per shape, one at a time, after ${settings.warmup} warm-up each) answered 200 with success true; p95 under ${TARGET_P95_MS} ms for ${allMet ? 'every shape' : 'some shapes only (see above)'}`,
      );
    } catch (err) {
      fail('IRC queries', err);
    }

    // ---- 3. reader pages over HTTP --------------------------------------------------------------------
    try {
      checkInterrupted();
      const sets = await readerSets(db, settings.queries + settings.warmup);
      const running = svc;
      const get = async (url: string) => {
        const s = performance.now();
        const res = await fetch(`${running.url}${url}`, { headers: { accept: 'text/html' } });
        const body = await res.text();
        const took = performance.now() - s;
        if (res.status !== 200 || !body.includes('<main>')) throw new Error(`GET ${url}: HTTP ${res.status} ${body.slice(0, 300)}`);
        return { ms: took, bytes: body.length };
      };
      let answered = 0;
      let allMet = true;
      for (const set of sets) {
        checkInterrupted();
        if (set.urls.length < settings.queries + settings.warmup)
          throw new Error(`${set.shape}: only ${set.urls.length} distinct pages could be drawn from the archive`);
        for (const u of set.urls.slice(0, settings.warmup)) await get(u);
        const times = [];
        const sizes = [];
        for (const u of set.urls.slice(settings.warmup, settings.warmup + settings.queries)) {
          const r = await get(u);
          times.push(r.ms);
          sizes.push(r.bytes);
          answered += 1;
        }
        const p95 = percentile(times, 95);
        const met = p95 < TARGET_READER_P95_MS;
        if (!met) allMet = false;
        log(`irc: reader ${set.shape}: p50 ${ms(percentile(times, 50))}, p95 ${ms(p95)}, p99 ${ms(percentile(times, 99))}`);
        row(
          `IRC reader page: ${set.shape} (${set.about})`,
          `p50 ${ms(percentile(times, 50))} / p95 ${ms(p95)} / p99 ${ms(percentile(times, 99))}; mean ${fmt(sizes.reduce((a, b) => a + b, 0) / sizes.length / 1024)} KiB of HTML; p95 target ${TARGET_READER_P95_MS} ms ${met ? 'MET' : 'MISSED'}`,
        );
      }
      row(
        'IRC reader check',
        `PASS: ${answered} measured pages (${settings.queries} per shape, one at a time, after ${settings.warmup} warm-up each) answered 200 with a page; p95 under ${TARGET_READER_P95_MS} ms for ${allMet ? 'every shape' : 'some shapes only (see above)'}`,
      );
    } catch (err) {
      fail('IRC reader pages', err);
    }
  } finally {
    await dropImportNetworks(importNetwork).catch((err: unknown) => log(`irc: removing the import network failed: ${errorText(err)}`));
    if (svc) await svc.close().catch((err: unknown) => log(`irc: closing the coordinator failed: ${errorText(err)}`));
    await db.end().catch(() => undefined);
  }
}
