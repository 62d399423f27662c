// Chat-log archive bench data: `npm run bench:irc:generate` (one command; builds first).
//
// Creates (or reuses) the dedicated database sonar_bench_irc on the PostgreSQL server named by
// BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/), applies the coordinator's
// migrations with its own code (coordinator/dist), and fills the archive with IRC_BENCH_ROWS
// (10,000,000) synthetic rows: production and sandbox networks, Zipf-sized channels living for
// parts of ten years, power-law nick activity with alternate nicks, a diurnal/weekly rhythm, a real
// event mix with netsplit bursts, and Zipf-distributed words. The rows are generated inside
// PostgreSQL (generate_series, one statement per half-year, over two connections); Node only plans
// channels, nicks and vocabulary. Then the counters the importer keeps (irc_channels, irc_nicks,
// irc_nick_links, irc_term_months, irc_channel_days) are computed from the rows, the common terms and
// their pair counts (irc_frequent_terms, irc_term_pairs) are chosen and counted as an import
// would, and the database is vacuumed and analyzed.
//
// Idempotent: when the database already holds a finished run of the requested size, it says so
// and exits; `--force` rebuilds. Progress and timings go to stderr; the database comment records
// the run (bench/src/irc.ts reads it). Everything is deterministic for a given IRC_BENCH_SEED.
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { errorStack, rng } from './lib.js';

/** Bump when the generated data changes shape: a database from another version is rebuilt. */
export const GENERATOR_VERSION = 3;
export const BENCH_IRC_DATABASE = 'sonar_bench_irc';
export const DEFAULT_SEED = 20261121;
const DEFAULT_ROWS = 10_000_000;
/** The archive's time span: ten years, [START, END). */
const START = '2015-01-01';
const END = '2025-01-01';
/** Bytes per slot of the packed word and nick tables handed to SQL (ASCII, space padded). */
const WORD_WIDTH = 24;
const NICK_WIDTH = 24;
/** Share of all rows that are netsplit/netmerge burst rows, and of normal rows in the sandbox archive. */
const NETSPLIT_SHARE = 0.013;
const SANDBOX_SHARE = 0.02;

const t0 = performance.now();
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(1).padStart(6)}s`;
const log = (...parts: unknown[]) => process.stderr.write(`[irc-generate ${elapsed()}] ${parts.join(' ')}\n`);
const fmt = (n: number | string | bigint) => Number(n).toLocaleString('en-US');

// ---- database addresses -------------------------------------------------------------------------

/** The server URL from BENCH_DATABASE_URL (its database part, when given, is the admin database). */
export function serverUrl(env: NodeJS.ProcessEnv = process.env): string {
  return env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/';
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export function adminDatabaseUrl(base = serverUrl()): string {
  const u = new URL(base);
  return u.pathname && u.pathname !== '/' ? u.toString() : withDatabase(base, 'postgres');
}

export function benchDatabaseUrl(base = serverUrl()): string {
  return withDatabase(base, BENCH_IRC_DATABASE);
}

/** What the generator records on the bench database (its comment) when a run has finished. */
export interface FinishedBenchState {
  complete: true;
  version: number;
  rows: number;
  seed: number;
  /** ISO time. */
  generatedAt: string;
  generateSeconds: number;
  loadSeconds: number;
  indexSeconds: number;
  vacuumSeconds: number;
  databaseBytes: number;
  nicks: number;
  links: number;
}
export type BenchState = FinishedBenchState | { complete: false };

/**
 * What the generator recorded on the bench database (its comment), or null when the database does
 * not exist; `{ complete: false }` when it holds no finished run.
 */
export async function readBenchState(base = serverUrl()): Promise<BenchState | null> {
  const client = new pg.Client({ connectionString: adminDatabaseUrl(base) });
  await client.connect();
  try {
    const { rows } = await client.query<{ note: string | null }>(`select shobj_description(oid, 'pg_database') as note from pg_database where datname = $1`, [
      BENCH_IRC_DATABASE,
    ]);
    if (!rows.length) return null;
    try {
      const state = JSON.parse(rows[0]?.note ?? 'null') as BenchState | null;
      return state?.complete ? state : { complete: false };
    } catch {
      return { complete: false };
    }
  } finally {
    await client.end();
  }
}

// ---- deterministic randomness -------------------------------------------------------------------

/**
 * Rank 1..n with P(rank) ≈ 1/rank (Zipf, s = 1): a log-uniform draw, floored. The SQL side uses
 * the same formula, so JS- and SQL-made text share one distribution.
 */
export const zipf = (rand: () => number, n: number): number => Math.floor(Math.exp(rand() * Math.log(n + 1)));
const zipfSql = (n: number | string) => `floor(exp(random() * ln(${n} + 1)))::int`;

const pick = <T>(rand: () => number, list: readonly T[]): T => list[Math.floor(rand() * list.length)]!; // an index below the length

// ---- vocabulary ---------------------------------------------------------------------------------

/**
 * Common chat English, roughly by frequency; they take the top ranks. Words that name channels of
 * the plan are left out (a search word naming a channel also matches that channel's rows).
 */
const ENGLISH = `the i to a you it and is that of in for on this be have not with but so do just it's what
can my no if we or i'm at like are was get don't your all one know from think they about as use yeah me out up
then would will some how an ok need should by make work more now any only see also thanks good here want try
maybe because well why when which sure thing still really time way much something other already new very people
them has did could can't there's doesn't too been right into where first fine who lol hmm yes even never what's
same problem actually probably him her those these than most back going got look let mean does over didn't
nothing point while after before around said help find better things question anyone someone long version always
day least enough seems using code file system change idea wrong done able since every though last pretty kind
stuff little fix bug issue error run running works working trying install build test server default config
package update read write set support data line user users name value list source case sorry hey hi hello
morning night today tomorrow week year old big small free open close start stop wait there their our us he she
his its were had being am doing said says tell told ask asked give take put keep call show hard easy fast slow
same both each few many such own again off down away yet quite just almost already probably exactly true false
yep nope nah thx ty np brb afk bbl imo iirc tbh btw fwiw heh haha`
  .split(/\s+/)
  .filter(Boolean);

// Mostly single consonants and vowels, so pseudo-words are about as long as real chat words.
const ONSETS = 'b c d f g h j k l m n p r s t v w z b d k l m n p r s t br ch cr dr fl gr kr pl pr sh sk sl sp st th tr'.split(' ').concat(['', '']);
const VOWELS = 'a e i o u a e i o u a e i o ai ea ee io ou oo y'.split(' ');
const CODAS = ['', '', '', '', '', '', 'n', 'r', 's', 'l', 'x', 't', 'm', 'k', 'ng', 'st', 'rd', 'nt'];

function pseudoWord(rand: () => number): string {
  const r = rand();
  const syllables = r < 0.2 ? 1 : r < 0.72 ? 2 : r < 0.95 ? 3 : 4;
  let w = '';
  for (let i = 0; i < syllables; i++) w += pick(rand, ONSETS) + pick(rand, VOWELS) + (i === syllables - 1 || rand() < 0.25 ? pick(rand, CODAS) : '');
  return w;
}

const vocabularies = new Map<string, string[]>();
/**
 * The generated vocabulary, index 0 = rank 1: the English words, then pseudo-words (40,000 in all).
 * Cached; deterministic per seed.
 */
export function vocabulary(seed = DEFAULT_SEED, size = 40_000): string[] {
  const key = `${seed}/${size}`;
  const cached = vocabularies.get(key);
  if (cached) return cached;
  const rand = rng(seed ^ 0x5eed0001);
  const seen = new Set<string>();
  const words: string[] = [];
  for (const w of ENGLISH) {
    if (seen.has(w) || CHANNEL_WORDS.has(w)) continue;
    seen.add(w);
    words.push(w);
  }
  while (words.length < size) {
    const w = pseudoWord(rand);
    if (w.length < 2 || w.length > WORD_WIDTH || seen.has(w) || CHANNEL_WORDS.has(w)) continue;
    seen.add(w);
    words.push(w);
  }
  vocabularies.set(key, words);
  return words;
}

/** Where the English part of the vocabulary ends (pseudo-words for URLs and code start after it). */
export function englishCount(seed = DEFAULT_SEED): number {
  const words = vocabulary(seed);
  let i = 0;
  while (i < words.length && ENGLISH.includes(words[i]!)) i++;
  return i;
}

// ---- nicks --------------------------------------------------------------------------------------

const ADJ = [
  'dark',
  'blue',
  'red',
  'mad',
  'lazy',
  'happy',
  'silent',
  'crazy',
  'little',
  'big',
  'old',
  'cool',
  'fast',
  'wild',
  'iron',
  'night',
  'sun',
  'moon',
  'star',
  'cyber',
  'pixel',
  'quantum',
  'retro',
  'zero',
  'grey',
  'neon',
];
const NOUN = [
  'fox',
  'wolf',
  'cat',
  'owl',
  'bear',
  'hacker',
  'coder',
  'ninja',
  'monk',
  'pilot',
  'ghost',
  'dragon',
  'tiger',
  'byte',
  'bit',
  'node',
  'kernel',
  'shell',
  'root',
  'daemon',
  'lynx',
  'hawk',
  'otter',
];
const ALT_SUFFIXES = ['_', '|away', '|afk', '_work', '-laptop', '`', '^', '2', '|zzz', '_mobile'];

function makeNick(rand: () => number): string | null {
  const base = pseudoWord(rand).slice(0, 9);
  const r = rand();
  let n;
  if (r < 0.35) n = base;
  else if (r < 0.5) n = base.charAt(0).toUpperCase() + base.slice(1);
  else if (r < 0.62) n = `${base}${Math.floor(rand() * 100)}`;
  else if (r < 0.74) n = `${pick(rand, ADJ)}${pick(rand, NOUN)}`;
  else if (r < 0.82) n = `${pick(rand, ADJ)}_${base.slice(0, 6)}`;
  else if (r < 0.88) n = base.replace(/e/g, '3').replace(/a/g, '4');
  else if (r < 0.93) n = `${base}_`;
  else if (r < 0.97) n = `[${base}]`;
  else n = `${base.charAt(0).toUpperCase()}${base.slice(1, 6)}${pick(rand, ['^', '`', '-', '|dev'])}`;
  return /^[A-Za-z[]/.test(n) && n.length >= 2 && n.length <= 16 ? n : null;
}

/**
 * `count` distinct nicks (case-insensitively distinct from each other and from `taken`), each
 * with its one alternate nick (away/work/mobile), also distinct. Deterministic per `rand`.
 */
export function makeNicks(rand: () => number, count: number, taken = new Set<string>()): { nicks: string[]; alts: string[] } {
  const nicks: string[] = [];
  const alts: string[] = [];
  while (nicks.length < count) {
    const n = makeNick(rand);
    if (!n || taken.has(n.toLowerCase()) || /^guest\d/i.test(n) || n.toLowerCase() === 'chanserv') continue;
    let alt = `${n}${pick(rand, ALT_SUFFIXES)}`;
    while (taken.has(alt.toLowerCase()) || alt.toLowerCase() === n.toLowerCase()) alt += '_';
    if (alt.length > NICK_WIDTH) continue;
    taken.add(n.toLowerCase());
    taken.add(alt.toLowerCase());
    nicks.push(n);
    alts.push(alt);
  }
  return { nicks, alts };
}

// ---- plan types ---------------------------------------------------------------------------------

interface NetworkSpec {
  key: string;
  source: 'production' | 'sandbox';
  name: string;
  /** First and last (exclusive) day, YYYY-MM-DD. */
  from: string;
  to: string;
  /** Nicks in the network's pool. */
  pool: number;
  /** The network whose first `shared` nicks this one starts with. */
  shareFrom?: string;
  shared?: number;
  rate: number;
  hshift: number;
  /** The QUIT reason of a netsplit. */
  split: string;
}

interface PlanNetwork extends NetworkSpec {
  nicks: string[];
  alts: string[];
  /** Offset of this network's nicks in the packed nick table. */
  poff: number;
  channels: PlanChannel[];
  dbId?: number;
}

interface PlanChannel {
  net: PlanNetwork;
  name: string;
  rate: number;
  from: number;
  to: number;
  /** Private conversations: the other party and the bouncer's owner. */
  partner: string | null;
  owner: string | null;
  index: number;
  /** The per-channel permutation of the nick pool: i -> (i * pmul + padd) % pn. */
  pn: number;
  pmul: number;
  padd: number;
  dbId?: number;
}

interface Window {
  label: string;
  from: number;
  to: number;
}

/** The normal rows of one channel in one half-year window. */
interface Piece {
  id: number;
  channel: PlanChannel;
  window: number;
  from: number;
  days: number;
  weight: number;
  exact: number;
  n: number;
}

interface Burst {
  id: number;
  channel: PlanChannel;
  at: number;
  /** Quits, then rejoins. */
  q: number;
  m: number;
  delay: number;
  reason: string;
  window: number;
  splitGroup: string;
  mergeGroup: string;
}

export interface Plan {
  rows: number;
  seed: number;
  nets: PlanNetwork[];
  channels: PlanChannel[];
  pieces: Piece[];
  bursts: Burst[];
  burstRows: number;
  windows: Window[];
  allNicks: string[];
  allAlts: string[];
}

// ---- the plan: networks, channels, pieces, netsplit bursts --------------------------------------

/**
 * Networks with their life span and nick pool. libera starts with many freenode nicks (people moved
 * in 2021). `hshift` moves the diurnal curve (efnet: more American). `rate` scales channel activity.
 */
const NETWORKS: NetworkSpec[] = [
  {
    key: 'production/freenode',
    source: 'production',
    name: 'freenode',
    from: START,
    to: '2021-06-20',
    pool: 2600,
    rate: 1.0,
    hshift: 0,
    split: '*.net *.split',
  },
  {
    key: 'production/libera',
    source: 'production',
    name: 'libera',
    from: '2021-05-19',
    to: END,
    pool: 3200,
    shareFrom: 'production/freenode',
    shared: 1800,
    rate: 1.0,
    hshift: 0,
    split: '*.net *.split',
  },
  {
    key: 'production/oftc',
    source: 'production',
    name: 'oftc',
    from: START,
    to: END,
    pool: 900,
    rate: 0.35,
    hshift: 1,
    split: 'helix.oftc.net graviton.oftc.net',
  },
  {
    key: 'production/efnet',
    source: 'production',
    name: 'efnet',
    from: START,
    to: END,
    pool: 600,
    rate: 0.25,
    hshift: 6,
    split: 'irc.efnet.nl irc.choopa.net',
  },
  { key: 'sandbox/testnet', source: 'sandbox', name: 'testnet', from: '2023-01-01', to: END, pool: 150, rate: 1.0, hshift: 0, split: '*.net *.split' },
  {
    key: 'sandbox/libera',
    source: 'sandbox',
    name: 'libera',
    from: '2024-01-01',
    to: END,
    pool: 60,
    shareFrom: 'production/libera',
    shared: 60,
    rate: 1.0,
    hshift: 0,
    split: '*.net *.split',
  },
];

/** Channels per network, biggest first (a channel's activity is ∝ 1/position^1.07). */
const CHANNELS: Record<string, string[]> = {
  'production/freenode': [
    '#python',
    '#linux',
    '#archlinux',
    '#debian',
    '#ubuntu',
    '#git',
    '#vim',
    '#emacs',
    '#haskell',
    '#postgresql',
    '#javascript',
    '#node.js',
    '#rust',
    '#go-nuts',
    '#docker',
    '#security',
    '#networking',
    '#c',
    '#c++',
    '#java',
    '#ruby',
    '#lisp',
    '#bitcoin',
    '#qtox',
  ],
  'production/libera': [
    '#python',
    '#linux',
    '#archlinux',
    '#debian',
    '#ubuntu',
    '#git',
    '#vim',
    '#emacs',
    '#haskell',
    '#postgresql',
    '#javascript',
    '#rust',
    '#go-nuts',
    '#nixos',
    '#zig',
    '#security',
    '#c',
    '#c++',
    '#lisp',
    '#fedora',
    '#alpine',
    '#kde',
    '#gnome',
    '#sway',
    '#ansible',
    '#qtox',
  ],
  'production/oftc': ['#debian-devel', '#kernelnewbies', '#tor', '#llvm', '#virt', '#openwrt', '#moocows', '#linux-rockchip', '#asahi', '#mesa'],
  'production/efnet': ['#unix', '#networking', '#chat', '#retro', '#ham-radio', '#opers', '#help', '#movies'],
  'sandbox/testnet': ['#test', '#bots', '#sandbox'],
  'sandbox/libera': ['#sonar-dev'],
};
/** Private conversations (logs named after the other party) on libera, kept by the bouncer's owner. */
const PRIVATE_CHANNELS = 5;
const CHANNEL_WORDS = new Set(
  Object.values(CHANNELS)
    .flat()
    .map((c) => c.replace(/^#+/, '')),
);

const DAY_MS = 86_400_000;
const dayMs = (d: string) => Date.parse(`${d}T00:00:00Z`);
const stamp = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');

/** Half-year windows [from, to) covering the span: one generating statement each. */
function windows(): Window[] {
  const out: Window[] = [];
  for (let y = Number(START.slice(0, 4)); y < Number(END.slice(0, 4)); y++) {
    out.push({ label: `${y} H1`, from: dayMs(`${y}-01-01`), to: dayMs(`${y}-07-01`) });
    out.push({ label: `${y} H2`, from: dayMs(`${y}-07-01`), to: dayMs(`${y + 1}-01-01`) });
  }
  return out;
}

const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);

/** Stable positive 63-bit id of a burst, made the way the importer makes its ids (sha256, first 8 bytes). */
function burstGroupId(channel: string, at: string, kind: 'split' | 'merge'): string {
  const h = createHash('sha256').update(`netsplit\n${channel.toLowerCase()}\n${at}\n${kind}`).digest();
  return (h.readBigUInt64BE(0) & 0x7fffffffffffffffn).toString();
}

/**
 * Everything decided in Node: networks with nick pools, channels with life spans and rates, the
 * normal-row count of each (channel, half-year) piece, and the netsplit bursts. Row counts add up
 * to exactly `rows`.
 */
export function makePlan(rows: number, seed = DEFAULT_SEED): Plan {
  const rand = rng(seed);
  const taken = new Set<string>();
  const nets: PlanNetwork[] = [];
  const allNicks: string[] = [];
  const allAlts: string[] = [];
  for (const spec of NETWORKS) {
    const shared = spec.shareFrom ? nets.find((n) => n.key === spec.shareFrom) : null;
    const sharedCount = shared ? (spec.shared ?? 0) : 0;
    const own = makeNicks(rand, spec.pool - sharedCount, taken);
    const nicks = [...(shared ? shared.nicks.slice(0, sharedCount) : []), ...own.nicks];
    const alts = [...(shared ? shared.alts.slice(0, sharedCount) : []), ...own.alts];
    const net: PlanNetwork = { ...spec, nicks, alts, poff: allNicks.length, channels: [] };
    allNicks.push(...nicks);
    allAlts.push(...alts);
    nets.push(net);
  }

  // Channels: activity ∝ network rate / position^1.07; some start later or die early.
  const channels: PlanChannel[] = [];
  const channel = (c: Omit<PlanChannel, 'index' | 'pn' | 'pmul' | 'padd'>): PlanChannel => ({ ...c, index: 0, pn: 0, pmul: 0, padd: 0 }); // set below
  for (const net of nets) {
    const names = CHANNELS[net.key] ?? [];
    const span = dayMs(net.to) - dayMs(net.from);
    names.forEach((name, i) => {
      let from = dayMs(net.from);
      let to = dayMs(net.to);
      if (i >= 4 && rand() < 0.4) from += Math.floor((rand() * 0.5 * span) / DAY_MS) * DAY_MS;
      if (i >= 4 && rand() < 0.1) to = from + Math.max(60, Math.floor(((0.3 + 0.6 * rand()) * (to - from)) / DAY_MS)) * DAY_MS;
      channels.push(channel({ net, name, rate: net.rate / (i + 1) ** 1.07, from, to, partner: null, owner: null }));
    });
    if (net.key === 'production/libera') {
      const partners = new Set<number>();
      while (partners.size < PRIVATE_CHANNELS) partners.add(1 + Math.floor(rand() * 40));
      for (const p of partners) {
        const partner = net.nicks[p]!; // p ≤ 40, the pool is bigger
        channels.push(
          channel({
            net,
            name: partner,
            rate: 0.012,
            from: dayMs(net.from) + Math.floor(rand() * 300) * DAY_MS,
            to: dayMs(net.to),
            partner,
            owner: net.nicks[0]!,
          }),
        );
      }
    }
  }
  const primes = [7919, 7927, 7933, 7937, 7949, 7951, 7963, 7993, 8009, 8011, 8017, 8039, 8053, 8059, 8069, 8081];
  channels.forEach((c, i) => {
    c.index = i;
    c.pn = c.net.pool;
    c.pmul = primes.find((p) => gcd(p, c.pn) === 1 && (p + i) % 2 === 1) ?? primes.find((p) => gcd(p, c.pn) === 1) ?? 1;
    c.padd = Math.floor(rand() * c.pn);
    c.net.channels.push(c);
  });

  // Netsplits: network-wide moments; every public channel alive then loses a share of its nicks
  // (10-100 in big channels), most of whom rejoin 1-20 minutes later (the merge).
  const wins = windows();
  const bursts: Burst[] = [];
  let burstRows = 0;
  const target = Math.floor(rows * NETSPLIT_SHARE);
  const netWeights = nets.map((n) => n.channels.reduce((s, c) => s + c.rate * (c.to - c.from), 0) * (n.source === 'sandbox' ? 0.1 : 1));
  const netTotal = netWeights.reduce((a, b) => a + b, 0);
  for (let attempts = 0; burstRows < target && attempts < 100_000; attempts++) {
    let r = rand() * netTotal;
    const net = nets.find((_, i) => (r -= netWeights[i]!) < 0) ?? nets[0]!;
    const at = dayMs(net.from) + Math.floor(rand() * ((dayMs(net.to) - dayMs(net.from)) / 1000 - 3600)) * 1000;
    const size = 10 + 90 * rand() ** 2;
    const maxRate = Math.max(...net.channels.filter((c) => !c.partner).map((c) => c.rate));
    for (const c of net.channels) {
      if (c.partner || at < c.from || at >= c.to - 3600_000) continue;
      const q = Math.min(Math.floor(c.pn / 2), Math.round(size * Math.sqrt(c.rate / maxRate)));
      if (q < 3) continue;
      const m = Math.round(q * (0.55 + 0.4 * rand()));
      if (burstRows + q + m > target) continue;
      const delay = 60 + Math.floor(rand() * 1140);
      bursts.push({
        id: bursts.length + 1,
        channel: c,
        at,
        q,
        m,
        delay,
        reason: net.split,
        window: wins.findIndex((w) => at >= w.from && at < w.to),
        splitGroup: burstGroupId(c.name, stamp(at), 'split'),
        mergeGroup: burstGroupId(c.name, stamp(at), 'merge'),
      });
      burstRows += q + m;
    }
  }

  // Normal rows: each (channel, half-year) piece gets rate × days × a slowly drifting activity
  // factor; the sandbox gets SANDBOX_SHARE; largest remainders make the total exact.
  const pieces: Piece[] = [];
  for (const c of channels) {
    let drift = 0.7 + 0.6 * rand();
    wins.forEach((w, wi) => {
      drift = Math.min(2, Math.max(0.3, drift * Math.exp(0.25 * (rand() + rand() - 1))));
      const from = Math.max(w.from, c.from);
      const to = Math.min(w.to, c.to);
      const days = Math.floor((to - from) / DAY_MS);
      if (days < 1) return;
      pieces.push({ channel: c, window: wi, from, days, weight: c.rate * days * drift, exact: 0, n: 0, id: 0 }); // exact, n, id: below
    });
  }
  const normalRows = rows - burstRows;
  const sum = (list: Piece[]) => list.reduce((s, p) => s + p.weight, 0);
  const sandbox = pieces.filter((p) => p.channel.net.source === 'sandbox');
  const production = pieces.filter((p) => p.channel.net.source !== 'sandbox');
  const scaleS = sandbox.length ? (SANDBOX_SHARE * normalRows) / sum(sandbox) : 0;
  const scaleP = ((sandbox.length ? 1 - SANDBOX_SHARE : 1) * normalRows) / sum(production);
  for (const p of pieces) p.exact = p.weight * (p.channel.net.source === 'sandbox' ? scaleS : scaleP);
  for (const p of pieces) p.n = Math.floor(p.exact);
  let left = normalRows - pieces.reduce((s, p) => s + p.n, 0);
  for (const p of [...pieces].sort((a, b) => b.exact - b.n - (a.exact - a.n) || a.channel.index - b.channel.index || a.window - b.window)) {
    if (left <= 0) break;
    p.n += 1;
    left -= 1;
  }
  pieces.forEach((p, i) => (p.id = i + 1));

  return { rows, seed, nets, channels, pieces: pieces.filter((p) => p.n > 0), bursts, burstRows, windows: wins, allNicks, allAlts };
}

/** Fixed-width, space-padded ASCII slots: SQL reads slot i with substring() in O(1). */
function pack(strings: readonly string[], width: number): Buffer {
  const buf = Buffer.alloc(strings.length * width, 0x20);
  strings.forEach((s, i) => {
    if (Buffer.byteLength(s) > width || /[^\x21-\x7e]/.test(s)) throw new Error(`cannot pack "${s}"`);
    buf.write(s, i * width, 'ascii');
  });
  return buf;
}

// ---- SQL ----------------------------------------------------------------------------------------

const EVENT_TYPES = ['PRIVMSG', 'ACTION', 'NOTICE', 'JOIN', 'PART', 'QUIT', 'NICK', 'MODE', 'TOPIC', 'KICK'];
/** Shares of the normal rows (netsplit bursts come on top, ~1.3% of all rows). */
const EVENT_WEIGHTS = [71, 3, 2, 9, 4, 7, 2, 1.2, 0.2, 0.3];
/** UTC hour of day 0..23 (Europe + Americas evening peak), Monday..Sunday. */
export const HOUR_WEIGHTS = [3.0, 2.4, 1.8, 1.3, 1.0, 0.9, 1.0, 1.4, 2.2, 3.2, 4.0, 4.5, 4.8, 5.0, 5.1, 5.3, 5.5, 5.6, 5.5, 5.3, 5.0, 4.6, 4.1, 3.5];
const WEEKDAY_WEIGHTS = [1.0, 1.05, 1.05, 1.0, 0.95, 0.7, 0.65];
export const QUIT_REASONS = [
  'Quit: Leaving',
  'Ping timeout: 260 seconds',
  'Read error: Connection reset by peer',
  'Remote host closed the connection',
  'Quit: ZNC 1.8.2 - https://znc.in',
  'Client Quit',
  'Quit: WeeChat 3.8',
  'Quit: Konversation terminated!',
  'Ping timeout: 245 seconds',
  'Max SendQ exceeded',
  'Quit: Bye',
  'Excess Flood',
  'Changing host',
  'Quit: The Lounge - https://thelounge.chat',
  'Quit: Lost terminal',
  'Quit: My MacBook has gone to sleep. ZZZzzz…',
];
const PART_REASONS = ['Leaving', 'WeeChat 3.8', 'bye', 'Konversation terminated!', 'later'];
const KICK_REASONS = ['spam', 'flood', 'please stay on topic', 'no bots', 'Your behavior is not conducive to the desired environment.', 'bye', 'enough'];
const TLDS = ['com', 'org', 'net', 'io', 'dev'];

/** Cumulative thresholds for width_bucket(random(), thresholds) → 0..weights.length-1. */
function thresholds(weights: readonly number[]): number[] {
  const total = weights.reduce((a, b) => a + b, 0);
  let acc = 0;
  return weights.slice(0, -1).map((w) => (acc += w) / total);
}

const sqlText = (s: string) => `'${s.replace(/'/g, "''")}'`;
const sqlArray = (list: readonly string[]) => `array[${list.map(sqlText).join(', ')}]`;

/**
 * One INSERT for one half-year: its pieces' normal rows (events drawn row by row with random())
 * and its netsplit bursts, in time order (as a live logger would write them). Parameters: $1 packed
 * vocabulary, $2 packed nicks, $3 packed alternate nicks, $4.. piece and burst arrays.
 */
function chunkSql(vocabSize: number, english: number): string {
  const word = (rank: string) => `rtrim(convert_from(substring($1::bytea from (${rank} - 1) * ${WORD_WIDTH} + 1 for ${WORD_WIDTH}), 'UTF8'))`;
  const anyWord = word(zipfSql(vocabSize));
  // Pseudo-words only (no "the"), for URLs and code tokens.
  const techWord = word(`${english} + ${zipfSql(vocabSize - english)}`);
  const nickAt = (table: string, idx: string) =>
    `rtrim(convert_from(substring(${table}::bytea from ((poff + ${idx} - 1) * ${NICK_WIDTH} + 1)::int for ${NICK_WIDTH}), 'UTF8'))`;
  // A correlated subquery (it reads the row's count), so it runs once per row.
  const words = (count: string) => `(select string_agg(${anyWord}, ' ') from generate_series(1, ${count}))`;
  const url = `case g % 3 when 0 then 'https://github.com/' || ${techWord} || '/' || ${techWord}
                 when 1 then 'https://' || ${techWord} || '.' || (${sqlArray(TLDS)})[1 + g % ${TLDS.length}] || '/' || ${techWord}
                 else 'http://' || ${techWord} || '.' || (${sqlArray(TLDS)})[1 + g % ${TLDS.length}] || '/' || ${techWord} || '.html' end`;
  const code = `case g % 6 when 0 then ${techWord} || '_' || ${techWord} || '()' when 1 then ${techWord} || '.' || ${techWord} || '()'
                 when 2 then ${techWord} || '::' || ${techWord} when 3 then '--' || ${techWord} || '-' || ${techWord}
                 when 4 then '$' || upper(${techWord}) else ${techWord} || '->' || ${techWord} || '[0]' end`;
  const guest = `'Guest' || (10000 + (ni * 7919 + poff) % 89999)`;
  const addressed = `(partner is null and u_addr < 0.12 and ni2 <> ni)`;
  const ban = `'*!*@' || lower(other) || '.users.example.org'`;
  const burstNick = nickAt('$2', `((k - 1 + b.bid)::bigint * b.pmul + b.padd) % b.pn + 1`).replace(/poff/g, 'b.poff');

  return `
    with pieces as (
      select * from unnest($4::int[], $5::int[], $6::int[], $7::timestamp[], $8::int[], $9::int[], $10::int[], $11::int[], $12::int[], $13::int[], $14::int[], $15::text[], $16::text[])
        as t(pid, ch, n, t0, days, dow0, hshift, poff, pn, pmul, padd, partner, owner)
    ), bursts as (
      select * from unnest($17::int[], $18::int[], $19::timestamp[], $20::int[], $21::int[], $22::int[], $23::text[], $24::bigint[], $25::bigint[], $26::int[], $27::int[], $28::int[], $29::int[])
        as t(bid, ch, t0, q, m, delay, reason, gsplit, gmerge, poff, pn, pmul, padd)
    ), draws as (
      -- One row per event with its random draws (OFFSET 0 keeps each draw evaluated once).
      select p.*, g,
             random() as u_type,
             floor(random() * ceil(p.days / 7.0)::int)::int * 7 + (width_bucket(random(), array[${thresholds(WEEKDAY_WEIGHTS).join(',')}]::float8[]) - p.dow0 + 7) % 7 as day0,
             (width_bucket(random(), array[${thresholds(HOUR_WEIGHTS).join(',')}]::float8[]) + p.hshift) % 24 as hr,
             floor(random() * 3600)::int as sec,
             ${zipfSql('p.pn')} as nr, ${zipfSql('p.pn')} as nr2,
             random() as u_perm, random() as u_who, random() as u_addr, random() as u_extra, random() as u_sub,
             1 + floor(24 * random() ^ 2)::int as nw
        from pieces p cross join lateral generate_series(1, p.n) g
      offset 0
    ), typed as (
      -- Event type, time, and which nicks: half the draws use the network-wide ranking, half a
      -- per-channel permutation of it, so each channel has its own regulars.
      select d.*,
             case when partner is not null then (u_type >= 0.95)::int else width_bucket(u_type, array[${thresholds(EVENT_WEIGHTS).join(',')}]::float8[]) end as et,
             t0 + make_interval(days => case when day0 >= days then day0 % days else day0 end, hours => hr, secs => sec) as at,
             case when u_perm < 0.5 then nr else (((nr - 1)::bigint * pmul + padd) % pn + 1)::int end as ni,
             case when u_perm < 0.5 then nr2 else (((nr2 - 1)::bigint * pmul + padd) % pn + 1)::int end as ni2,
             (((nr % 5)::bigint * pmul + padd) % pn + 1)::int as op
        from draws d
      offset 0
    ), named as (
      select t.*, ${nickAt('$2', 'ni')} as base, ${nickAt('$3', 'ni')} as alt, ${nickAt('$2', 'ni2')} as other, ${nickAt('$2', 'op')} as opnick
        from typed t
      offset 0
    ), normal as (
      select ch as channel_id,
             (${sqlArray(EVENT_TYPES)})[et + 1] as event_type,
             at as occurred_at,
             case when partner is not null then (case when u_who < 0.5 then partner else owner end)
                  when et in (7, 8, 9) then (case when u_who < 0.4 then 'ChanServ' else opnick end)
                  when et = 6 then (case when u_sub < 0.45 then base when u_sub < 0.9 then alt else ${guest} end)
                  when u_who < 0.05 then alt else base end as nick,
             case et
               when 0 then (case when ${addressed} then other || ': ' else '' end) || ${words('nw')}
                           || (case when u_extra < 0.03 then ' ' || ${url} when u_extra < 0.065 then ' ' || ${code} else '' end)
               when 1 then ${words('1 + nw / 3')}
               when 2 then ${words('nw')}
               when 4 then (case when u_sub < 0.6 then null else (${sqlArray(PART_REASONS)})[1 + floor(u_extra * ${PART_REASONS.length})::int] end)
               when 5 then (${sqlArray(QUIT_REASONS)})[1 + floor(u_sub * ${QUIT_REASONS.length})::int]
               when 7 then (case when u_sub < 0.35 then '+o ' || other when u_sub < 0.5 then '-o ' || other when u_sub < 0.75 then '+v ' || other
                                 when u_sub < 0.9 then '+b ' || ${ban} else '+nt' end)
               when 8 then ${words('6 + nw / 2')} || (case when u_extra < 0.3 then ' | ' || ${url} else '' end)
               when 9 then (${sqlArray(KICK_REASONS)})[1 + floor(u_sub * ${KICK_REASONS.length})::int]
             end as message_text,
             case when partner is not null then (case when u_who < 0.5 then null else partner end)
                  when et = 7 then (case when u_sub < 0.75 then other when u_sub < 0.9 then ${ban} end) end as target,
             case when et = 0 and ${addressed} then other
                  when et = 6 then (case when u_sub < 0.45 then alt else base end)
                  when et = 9 then other end as to_nick,
             null::bigint as netsplit_group, false as netsplit_leader,
             sha256(convert_to('e:' || pid || ':' || g, 'UTF8')) as line_hash
        from named
    ), splits as (
      -- A burst: q quits with the split reason within seconds, then m of them rejoin (NETMERGE).
      select b.ch, 'NETSPLIT', b.t0 + make_interval(secs => (k - 1) / 8), ${burstNick}, b.reason, null, null, b.gsplit, k = 1,
             sha256(convert_to('s:' || b.bid || ':' || k, 'UTF8'))
        from bursts b cross join lateral generate_series(1, b.q) k
      union all
      select b.ch, 'NETMERGE', b.t0 + make_interval(secs => b.delay + (k - 1) / 6), ${burstNick}, null, null, null, b.gmerge, k = 1,
             sha256(convert_to('m:' || b.bid || ':' || k, 'UTF8'))
        from bursts b cross join lateral generate_series(1, b.m) k
    )
    insert into irc_events (channel_id, event_type, occurred_at, nick, message_text, target, to_nick, netsplit_group, netsplit_leader, line_hash)
    select * from (select * from normal union all select * from splits) r order by occurred_at`;
}

function chunkParams(plan: Plan, w: number, packed: { vocab: Buffer; nicks: Buffer; alts: Buffer }): unknown[] {
  const pieces = plan.pieces.filter((p) => p.window === w);
  const bursts = plan.bursts.filter((b) => b.window === w);
  const col = <T, V>(list: T[], f: (item: T) => V): V[] => list.map(f);
  return [
    packed.vocab,
    packed.nicks,
    packed.alts,
    col(pieces, (p) => p.id),
    col(pieces, (p) => p.channel.dbId),
    col(pieces, (p) => p.n),
    col(pieces, (p) => stamp(p.from)),
    col(pieces, (p) => p.days),
    col(pieces, (p) => (new Date(p.from).getUTCDay() + 6) % 7),
    col(pieces, (p) => p.channel.net.hshift),
    col(pieces, (p) => p.channel.net.poff),
    col(pieces, (p) => p.channel.pn),
    col(pieces, (p) => p.channel.pmul),
    col(pieces, (p) => p.channel.padd),
    col(pieces, (p) => p.channel.partner),
    col(pieces, (p) => p.channel.owner),
    col(bursts, (b) => b.id),
    col(bursts, (b) => b.channel.dbId),
    col(bursts, (b) => stamp(b.at)),
    col(bursts, (b) => b.q),
    col(bursts, (b) => b.m),
    col(bursts, (b) => b.delay),
    col(bursts, (b) => b.reason),
    col(bursts, (b) => b.splitGroup),
    col(bursts, (b) => b.mergeGroup),
    col(bursts, (b) => b.channel.net.poff),
    col(bursts, (b) => b.channel.pn),
    col(bursts, (b) => b.channel.pmul),
    col(bursts, (b) => b.channel.padd),
  ];
}

/** Counter columns of irc_channels and how to compute each from the rows (the event store keeps the same). */
const CHANNEL_COUNTERS: Record<string, string> = {
  event_count: 'count(*)',
  first_at: 'min(occurred_at)',
  last_at: 'max(occurred_at)',
  netsplit_count: `count(*) filter (where event_type in ('NETSPLIT', 'NETMERGE'))`,
  netsplit_leader_count: `count(*) filter (where event_type in ('NETSPLIT', 'NETMERGE') and netsplit_leader)`,
};

// ---- running ------------------------------------------------------------------------------------

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

/** Session settings for bulk work; the backend stops when this process goes away. */
async function bulkSession(client: pg.Client): Promise<void> {
  await client.query(`set maintenance_work_mem = '2GB'`);
  await client.query(`set work_mem = '1GB'`);
  await client.query('set max_parallel_maintenance_workers = 0'); // two connections already use both cores
  await client.query('set synchronous_commit = off');
  await client.query('set jit = off'); // compiling the big INSERT costs ~1 s per statement and saved nothing when measured
  await client.query(`set client_connection_check_interval = '2s'`);
}

/** Runs `tasks` (async (client) => void) over the clients, each client taking the next task when free. */
async function runQueue(clients: readonly pg.Client[], tasks: Array<(client: pg.Client) => Promise<unknown>>): Promise<void> {
  let next = 0;
  await Promise.all(
    clients.map(async (client) => {
      while (next < tasks.length) await tasks[next++]!(client);
    }),
  );
}

async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const s = performance.now();
  const out = await fn();
  log(`${label}: ${((performance.now() - s) / 1000).toFixed(1)} s`);
  return out;
}

async function generate({ rows, seed, force }: { rows: number; seed: number; force: boolean }): Promise<void> {
  const base = serverUrl();
  const state = await readBenchState(base).catch((err: unknown) => {
    throw new Error(`cannot reach PostgreSQL at ${adminDatabaseUrl(base)}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  });
  if (state?.complete && state.rows === rows && state.seed === seed && state.version === GENERATOR_VERSION && !force) {
    const bench = await connect(benchDatabaseUrl(base));
    try {
      const r = (
        await bench.query<{ n: string; size: string }>(
          'select coalesce(sum(event_count), 0)::bigint as n, pg_database_size(current_database()) as size from irc_channels',
        )
      ).rows[0]!;
      if (Number(r.n) === rows) {
        log(
          `${BENCH_IRC_DATABASE} already holds ${fmt(rows)} rows (generated ${state.generatedAt} in ${state.generateSeconds} s, ${(Number(r.size) / 2 ** 30).toFixed(2)} GiB); nothing to do (--force rebuilds)`,
        );
        return;
      }
      log(`${BENCH_IRC_DATABASE} counts ${fmt(r.n)} rows, not ${fmt(rows)} (an interrupted bench run?); rebuilding`);
    } finally {
      await bench.end();
    }
  } else if (state) {
    log(
      force
        ? '--force: rebuilding'
        : `${BENCH_IRC_DATABASE} holds ${state.complete ? `another run (${fmt(state.rows)} rows, seed ${state.seed}, version ${state.version})` : 'an unfinished run'}; rebuilding`,
    );
  }

  // A fresh database each time: the schema (and the index definitions read below) come straight
  // from the migrations, whatever an interrupted run left behind.
  const admin = await connect(adminDatabaseUrl(base));
  try {
    await admin.query(`drop database if exists ${BENCH_IRC_DATABASE} with (force)`);
    await admin.query(`create database ${BENCH_IRC_DATABASE}`);
  } finally {
    await admin.end();
  }
  const url = benchDatabaseUrl(base);
  await timed('migrations (coordinator/dist openOrm + migrate)', async () => {
    const { openOrm, migrate } = await import('../../coordinator/dist/db/orm.js');
    const orm = await openOrm({ databaseUrl: url, poolMax: 2 });
    try {
      await migrate(orm);
    } finally {
      await orm.close(true);
    }
  });

  const plan = makePlan(rows, seed);
  const vocab = vocabulary(seed);
  const english = englishCount(seed);
  const packed = { vocab: pack(vocab, WORD_WIDTH), nicks: pack(plan.allNicks, NICK_WIDTH), alts: pack(plan.allAlts, NICK_WIDTH) };
  log(
    `plan: ${fmt(rows)} rows; ${plan.nets.length} networks, ${plan.channels.length} channels (${PRIVATE_CHANNELS} private), ` +
      `${fmt(plan.allNicks.length)} nick slots (+ alternates), ${fmt(vocab.length)} words (${english} English), ` +
      `${fmt(plan.pieces.length)} channel half-years, ${fmt(plan.bursts.length)} netsplit bursts (${fmt(plan.burstRows)} rows)`,
  );

  const clients = [await connect(url), await connect(url)] as const;
  try {
    for (const c of clients) await bulkSession(c);
    const [c0] = clients;

    // Networks and channels, as the importer's ensureNetwork/ensureChannel would make them.
    for (const net of plan.nets) {
      net.dbId = (await c0.query<{ id: number }>('insert into irc_networks (source, name) values ($1, $2) returning id', [net.source, net.name])).rows[0]!.id;
      for (const ch of net.channels) {
        ch.dbId = (
          await c0.query<{ id: number }>('insert into irc_channels (network_id, name, is_private) values ($1, $2, $3) returning id', [
            net.dbId,
            ch.name,
            !/^[#&+!]/.test(ch.name),
          ])
        ).rows[0]!.id;
      }
    }

    // Secondary indexes, the unique key and the foreign key off while loading; the exact
    // definitions read here are re-run afterwards (the primary key stays: it only appends).
    const { rows: idx } = await c0.query<{ name: string; def: string; constraint: string | null }>(
      `select i.indexrelid::regclass::text as name, pg_get_indexdef(i.indexrelid) as def, c.conname as constraint
         from pg_index i left join pg_constraint c on c.conindid = i.indexrelid and c.conrelid = i.indrelid and c.contype = 'u'
        where i.indrelid = 'irc_events'::regclass and not i.indisprimary`,
    );
    const { rows: fks } = await c0.query<{ conname: string; def: string }>(
      `select conname, pg_get_constraintdef(oid) as def from pg_constraint where conrelid = 'irc_events'::regclass and contype = 'f'`,
    );
    for (const f of fks) await c0.query(`alter table irc_events drop constraint ${f.conname}`);
    for (const i of idx) await c0.query(i.constraint ? `alter table irc_events drop constraint ${i.constraint}` : `drop index ${i.name}`);
    log(`dropped ${idx.length} indexes and ${fks.length} foreign key(s) of irc_events: ${idx.map((i) => i.name).join(', ')}`);

    // Load: one statement per half-year, two at a time.
    const sql = chunkSql(vocab.length, english);
    let loaded = 0;
    const loadStart = performance.now();
    await runQueue(
      clients,
      plan.windows.map((w, wi) => async (client) => {
        const n =
          plan.pieces.filter((p) => p.window === wi).reduce((s, p) => s + p.n, 0) +
          plan.bursts.filter((b) => b.window === wi).reduce((s, b) => s + b.q + b.m, 0);
        if (!n) return;
        const s = performance.now();
        await client.query('select setseed($1)', [((seed + wi * 7919) % 2_000_000) / 2_000_000]); // each half-year is reproducible
        const res = await client.query(sql, chunkParams(plan, wi, packed));
        if (res.rowCount !== n) throw new Error(`${w.label}: inserted ${res.rowCount} rows, planned ${n}`);
        loaded += n;
        const secs = (performance.now() - s) / 1000;
        const rate = loaded / ((performance.now() - loadStart) / 1000);
        log(
          `loaded ${w.label}: ${fmt(n)} rows in ${secs.toFixed(1)} s; ${fmt(loaded)}/${fmt(rows)} (${((loaded / rows) * 100).toFixed(0)}%), ${fmt(Math.round(rate))} rows/s overall, ~${Math.round((rows - loaded) / rate)} s left`,
        );
      }),
    );
    const loadSeconds = (performance.now() - loadStart) / 1000;

    // Indexes (largest first, two at a time) and, alongside, the counters the event store keeps.
    const { rows: have } = await c0.query<{ column_name: string }>(
      `select column_name from information_schema.columns where table_schema = current_schema() and table_name = 'irc_channels'`,
    );
    const counters = Object.entries(CHANNEL_COUNTERS).filter(([col]) => have.some((h) => h.column_name === col));
    const cost = (def: string) => (/gin_trgm_ops/.test(def) ? 3 : /using gin/i.test(def) ? 2 : /include/i.test(def) ? 1 : 0);
    const indexTasks = [...idx].sort((a, b) => cost(b.def) - cost(a.def));
    const buildStart = performance.now();
    await runQueue(clients, [
      ...indexTasks.map((i) => (client: pg.Client) => timed(`index ${i.name}`, () => client.query(i.def))),
      (client) =>
        timed(`irc_channels counters (${counters.map(([c]) => c).join(', ')})`, () =>
          client.query(
            `update irc_channels c set ${counters.map(([col]) => `${col} = s.${col}`).join(', ')}
           from (select channel_id, ${counters.map(([col, expr]) => `${expr} as ${col}`).join(', ')} from irc_events group by channel_id) s
          where c.id = s.channel_id`,
          ),
        ),
      (client) =>
        timed('irc_nicks', () =>
          client.query(
            `insert into irc_nicks (network_id, nick_key, nick, first_at, last_at, last_message_at, message_count, event_count)
         select c.network_id, lower(e.nick), max(e.nick), min(e.occurred_at), max(e.occurred_at),
                max(e.occurred_at) filter (where e.event_type in ('PRIVMSG', 'ACTION')),
                count(*) filter (where e.event_type in ('PRIVMSG', 'ACTION')), count(*)
           from irc_events e join irc_channels c on c.id = e.channel_id
          where e.nick is not null group by 1, 2`,
          ),
        ),
      (client) =>
        timed('irc_term_months (per-term monthly counts)', () =>
          client.query(
            `insert into irc_term_months (term, channel_id, month, n, days)
         select t.lexeme, e.channel_id, date_trunc('month', e.occurred_at)::date, count(*), bit_or(1 << (extract(day from e.occurred_at)::int - 1))
           from irc_events e cross join lateral unnest(e.search_vector) t
          where e.event_type not in ('NETSPLIT', 'NETMERGE')
          group by 1, 2, 3`,
          ),
        ),
      (client) =>
        timed('irc_channel_days (rows per channel and day)', () =>
          client.query(
            `insert into irc_channel_days (channel_id, day, events, messages)
         select channel_id, occurred_at::date, count(*), count(*) filter (where event_type in ('PRIVMSG', 'ACTION', 'NOTICE'))
           from irc_events group by 1, 2`,
          ),
        ),
      (client) =>
        timed('irc_nick_links (NICK events)', () =>
          client.query(
            `insert into irc_nick_links (network_id, nick_key, other_key, origin)
         select distinct c.network_id, least(lower(e.nick), lower(e.to_nick)), greatest(lower(e.nick), lower(e.to_nick)), 'log'
           from irc_events e join irc_channels c on c.id = e.channel_id
          where e.event_type = 'NICK' and e.nick is not null and e.to_nick is not null and lower(e.nick) <> lower(e.to_nick)
            and lower(e.nick) !~ '^guest[0-9]+$' and lower(e.to_nick) !~ '^guest[0-9]+$'
         on conflict do nothing`,
          ),
        ),
    ]);
    // Constraints last: ALTER TABLE would have locked out the parallel index builds.
    for (const i of idx.filter((i) => i.constraint)) {
      await timed(`constraint ${i.constraint}`, () => c0.query(`alter table irc_events add constraint ${i.constraint} unique using index ${i.name}`));
    }
    for (const f of fks) await timed(`constraint ${f.conname}`, () => c0.query(`alter table irc_events add constraint ${f.conname} ${f.def}`));
    // The common terms and their pair counts, chosen and counted as an import would (through the full-text index).
    await timed('irc_frequent_terms, irc_term_pairs (IrcCommonTerms.refresh)', async () => {
      const { openOrm } = await import('../../coordinator/dist/db/orm.js');
      const { IrcCommonTerms } = await import('../../coordinator/dist/irc/common-terms.js');
      const orm = await openOrm({ databaseUrl: url, poolMax: 2 });
      try {
        await new IrcCommonTerms(orm).refresh();
      } finally {
        await orm.close();
      }
    });
    const buildSeconds = (performance.now() - buildStart) / 1000;

    const vacuumStart = performance.now();
    await runQueue(clients, [
      (client) => timed('vacuum analyze irc_events', () => client.query('vacuum analyze irc_events')),
      (client) =>
        timed(
          'vacuum analyze irc_networks, irc_channels, irc_nicks, irc_nick_links, irc_term_months, irc_channel_days, irc_frequent_terms, irc_term_pairs',
          () =>
            client.query(
              'vacuum analyze irc_networks, irc_channels, irc_nicks, irc_nick_links, irc_term_months, irc_channel_days, irc_frequent_terms, irc_term_pairs',
            ),
        ),
    ]);
    const vacuumSeconds = (performance.now() - vacuumStart) / 1000;

    const check = (
      await c0.query<{ events: string; counted: string; nicks: string; links: string; size: string; events_size: string }>(
        `select (select count(*) from irc_events)::bigint as events, (select sum(event_count) from irc_channels)::bigint as counted,
              (select count(*) from irc_nicks)::bigint as nicks, (select count(*) from irc_nick_links)::bigint as links,
              pg_database_size(current_database()) as size, pg_total_relation_size('irc_events') as events_size`,
      )
    ).rows[0]!;
    if (Number(check.events) !== rows || Number(check.counted) !== rows)
      throw new Error(`expected ${rows} rows, found ${check.events} (counters say ${check.counted})`);
    const seconds = Math.round((performance.now() - t0) / 1000);
    const note = {
      complete: true,
      version: GENERATOR_VERSION,
      rows,
      seed,
      generatedAt: new Date().toISOString(),
      generateSeconds: seconds,
      loadSeconds: Math.round(loadSeconds),
      indexSeconds: Math.round(buildSeconds),
      vacuumSeconds: Math.round(vacuumSeconds),
      databaseBytes: Number(check.size),
      nicks: Number(check.nicks),
      links: Number(check.links),
    };
    await c0.query(`comment on database ${BENCH_IRC_DATABASE} is ${c0.escapeLiteral(JSON.stringify(note))}`);
    log(
      `done: ${fmt(rows)} rows in ${seconds} s (load ${loadSeconds.toFixed(0)} s, ${fmt(Math.round(rows / loadSeconds))} rows/s; indexes + counters ${buildSeconds.toFixed(0)} s; vacuum analyze ${vacuumSeconds.toFixed(0)} s); ` +
        `${fmt(check.nicks)} nicks, ${fmt(check.links)} nick links; database ${(Number(check.size) / 2 ** 30).toFixed(2)} GiB (irc_events with indexes ${(Number(check.events_size) / 2 ** 30).toFixed(2)} GiB)`,
    );
  } finally {
    for (const c of clients) await c.end().catch(() => undefined);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const unknown = args.filter((a) => a !== '--force');
  if (unknown.length) {
    process.stderr.write(`usage: node bench/dist/irc-generate.js [--force]   (env: IRC_BENCH_ROWS, IRC_BENCH_SEED, BENCH_DATABASE_URL)\n`);
    process.exit(2);
  }
  const rows = Number(process.env.IRC_BENCH_ROWS || DEFAULT_ROWS);
  const seed = Number(process.env.IRC_BENCH_SEED || DEFAULT_SEED);
  if (!Number.isInteger(rows) || rows < 10_000) {
    process.stderr.write(`IRC_BENCH_ROWS must be an integer of at least 10000, not "${process.env.IRC_BENCH_ROWS}"\n`);
    process.exit(2);
  }
  // Ctrl-C: the database stays unmarked (no comment), so the next run rebuilds it.
  process.on('SIGINT', () => {
    log('interrupted; the next run starts over');
    process.exit(130);
  });
  try {
    await generate({ rows, seed: Number.isInteger(seed) ? seed : DEFAULT_SEED, force: args.includes('--force') });
  } catch (err) {
    log(`failed: ${errorStack(err)}`);
    process.exitCode = 1;
  }
}
