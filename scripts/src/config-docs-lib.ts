// The settings reference (docs/configuration.md) from the settings' own declarations: the
// coordinator's zod schema (coordinator/src/config.ts: each variable's description, default and
// accepted values) and the worker agent's command line (worker/src/options.ts: each option with its
// environment variable). Variables read straight from process.env by the quick start and the
// worker's engines have no schema; they are listed here, next to where the page is made.
import { envSchema } from '../../coordinator/dist/config.js';
import { workerCommand } from '../../worker/dist/options.js';

interface CheckDef {
  check: string;
  format?: string;
  value?: number;
  inclusive?: boolean;
  minimum?: number;
}

/** The parts of a zod 4 schema the page reads (its definition, its checks' summary and its metadata). */
interface SchemaNode {
  _zod: {
    def: {
      type: string;
      innerType?: SchemaNode;
      in?: SchemaNode;
      defaultValue?: unknown;
      entries?: Record<string, unknown>;
      format?: string;
      checks?: { _zod: { def: CheckDef } }[];
    };
  };
  meta(): Record<string, unknown> | undefined;
}

export interface Setting {
  name: string;
  description: string;
  /** How the default reads on the page: `required`, `unset`, `empty` or the value. */
  default: string;
  /** What the value may be (enum values, a number range, a URL), or '' when it is free text. */
  accepts: string;
}

/** Headings of the coordinator's settings, by the first prefix that matches (schema order within). */
const SECTIONS: [heading: string, test: (name: string) => boolean][] = [
  ['HTTP server', (n) => ['NODE_ENV', 'HOST', 'PORT', 'PUBLIC_BASE_URL', 'LOG_LEVEL', 'TRUST_PROXY'].includes(n)],
  ['PostgreSQL', (n) => n.startsWith('DATABASE_')],
  ['Redis', (n) => n.startsWith('REDIS_')],
  ['Worker gRPC', (n) => n.startsWith('GRPC_') || n.startsWith('WORKER_')],
  ['Accounts, sessions and rate limits', (n) => /^(SESSION|COOKIE|JWT|LOGIN|TOKEN|ADMIN)_/.test(n)],
  ['Metrics and API document', (n) => n.startsWith('METRICS_') || n.startsWith('OPENAPI_')],
  ['Speech queue', (n) => /^(SPEECH|OUTBOUND|SMTP|MAIL)_/.test(n) && !n.startsWith('SPEECH_AI_')],
  ['Analysis, translations and titles (OpenAI-compatible provider)', (n) => n.startsWith('OPENAI_') || n.startsWith('SPEECH_AI_')],
  ['DNS API', (n) => n.startsWith('DNS_')],
  ['Organization assistant connector', (n) => n.startsWith('ASSISTANT_')],
  ['Chat-log archive', (n) => n.startsWith('IRC_')],
  ['Spam scoring', (n) => n.startsWith('SPAMD_')],
  ['Dynamic DNS', (n) => n.startsWith('DYNDNS_')],
  ['Reputation', (n) => n.startsWith('REPUTATION_')],
];
const OTHER = 'Other';

const code = (v: string) => '`' + v + '`';

function unwrap(node: SchemaNode): SchemaNode {
  const def = node._zod.def;
  if ((def.type === 'default' || def.type === 'optional' || def.type === 'prefault') && def.innerType) return unwrap(def.innerType);
  if (def.type === 'pipe' && def.in) return unwrap(def.in);
  return node;
}

/** The default a setting's schema declares, or undefined (looking through optional and transforms). */
function declaredDefault(node: SchemaNode): { value: unknown } | undefined {
  const def = node._zod.def;
  if (def.type === 'default') return { value: def.defaultValue };
  if ((def.type === 'optional' || def.type === 'prefault') && def.innerType) return declaredDefault(def.innerType);
  if (def.type === 'pipe' && def.in) return declaredDefault(def.in);
  return undefined;
}

function isOptional(node: SchemaNode): boolean {
  const def = node._zod.def;
  if (def.type === 'optional') return true;
  if (def.type === 'pipe' && def.in) return isOptional(def.in);
  return false;
}

function formatDefault(value: unknown): string {
  if (Array.isArray(value)) return value.length ? code(value.map(String).join(',')) : 'empty';
  if (value === '') return 'empty';
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return code(String(value));
  return code(JSON.stringify(value));
}

function accepts(node: SchemaNode): string {
  const { def } = unwrap(node)._zod;
  const checks = (def.checks ?? []).map((c) => c._zod.def);
  const find = (check: string) => checks.find((c) => c.check === check);
  if (def.type === 'enum' && def.entries) return Object.keys(def.entries).map(code).join(', ');
  if (def.type === 'number') {
    const kind = find('number_format')?.format?.includes('int') ? 'integer' : 'number';
    const min = find('greater_than');
    const max = find('less_than');
    const bound = (c: CheckDef | undefined) => (c?.value === undefined ? undefined : `${c.value}${c.inclusive ? '' : ' (exclusive)'}`);
    if (bound(min) && bound(max)) return `${kind} ${bound(min)}–${bound(max)}`;
    if (bound(min)) return `${kind} ≥ ${bound(min)}`;
    if (bound(max)) return `${kind} ≤ ${bound(max)}`;
    return kind;
  }
  if (def.format === 'url') return 'URL';
  const minLength = find('min_length')?.minimum;
  if (def.type === 'string' && minLength !== undefined && minLength > 1) return `≥ ${minLength} characters`;
  return '';
}

/** The coordinator's settings in schema order. */
export function coordinatorSettings(): Setting[] {
  return Object.entries(envSchema.shape).map(([name, schema]) => {
    const node = schema as unknown as SchemaNode;
    const meta = node.meta() ?? {};
    const description = typeof meta.description === 'string' ? meta.description : '';
    const shown = typeof meta.shownDefault === 'string' ? meta.shownDefault : undefined;
    const declared = declaredDefault(node);
    const dflt = shown ?? (declared ? formatDefault(declared.value) : isOptional(node) ? 'unset' : 'required');
    return { name, description, default: dflt, accepts: accepts(node) };
  });
}

/** Read with process.env by the quick start (coordinator/src/quickstart.ts) only. */
const QUICKSTART_SETTINGS: Setting[] = [
  {
    name: 'SONAR_DATA_DIR',
    default: '`./.data`',
    accepts: '',
    description: 'Folder of the embedded PostgreSQL, a child Redis, generated secrets (`secrets.json`), BIND and run state (at the repository root)',
  },
  { name: 'EMBEDDED_PG_PORT', default: '`54329`', accepts: '', description: 'Port of the embedded PostgreSQL, started only when `DATABASE_URL` is unset' },
  { name: 'WHISPER_MODELS_DIR', default: '`.data/models`', accepts: '', description: 'Passed to the local worker agent (its `--models-dir`)' },
  {
    name: 'DNS_QUICKSTART_PORT',
    default: '`53535`',
    accepts: '',
    description: "The loopback port of the quick start's `named` (the DNS API's master for the sample zone `example.test`), started when BIND is installed",
  },
];

/** Read with process.env by the worker's engines (worker/src/engines/). */
const WORKER_ENGINE_SETTINGS: Setting[] = [
  {
    name: 'WHISPER_WORD_TIMESTAMPS',
    default: 'on',
    accepts: '`0` turns it off',
    description:
      'whisper.cpp word times; `0` runs whisper.cpp without them, so its segments are labelled with speakers whole instead of word by word (see [diarization.md](diarization.md))',
  },
  { name: 'WHISPER_THREADS', default: 'the cores, at most 8', accepts: 'integer', description: 'Threads of one whisper.cpp run' },
  { name: 'WHISPER_CLI', default: 'the built `whisper-cli`', accepts: '', description: "Path of whisper.cpp's CLI" },
  {
    name: 'WHISPER_BUILD_DIR',
    default: '`worker/.whisper-build`',
    accepts: '',
    description: 'Where whisper.cpp was built (`npm run whisper:build -w worker`)',
  },
  { name: 'POCKETSPHINX_MODEL_DIR', default: "Debian's en-us model folders", accepts: '', description: "pocketsphinx's US English model folder" },
];

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function settingsTable(settings: Setting[]): string[] {
  return [
    '| Variable | Default | Accepts | Meaning |',
    '|---|---|---|---|',
    ...settings.map((s) => `| ${code(s.name)} | ${cell(s.default)} | ${cell(s.accepts)} | ${cell(s.description)} |`),
  ];
}

function workerTable(): string[] {
  const cmd = workerCommand('0.0.0');
  const rows = cmd.options.map((o) => {
    const dflt = o.defaultValue === undefined ? '' : code(String(o.defaultValue as string | number | boolean));
    const choices = o.argChoices ? ` (${o.argChoices.map(code).join(', ')})` : '';
    return `| ${code(o.flags)} | ${o.envVar ? code(o.envVar) : ''} | ${cell(dflt)} | ${cell(o.description + choices)} |`;
  });
  return ['| Option | Environment | Default | Meaning |', '|---|---|---|---|', ...rows];
}

/** docs/configuration.md's text for the code as built now. */
export function configMarkdown(): string {
  const settings = coordinatorSettings();
  const groups = new Map<string, Setting[]>();
  for (const [heading] of SECTIONS) groups.set(heading, []);
  for (const s of settings) {
    const heading = SECTIONS.find(([, test]) => test(s.name))?.[0] ?? OTHER;
    const list = groups.get(heading) ?? [];
    list.push(s);
    groups.set(heading, list);
  }
  const out = [
    '# Configuration',
    '',
    '<!-- Generated by `npm run docs:config` from coordinator/src/config.ts and worker/src/options.ts; do not edit. -->',
    '',
    'The coordinator reads only environment variables, validated in `coordinator/src/config.ts`; a bad',
    'value stops the start with a message naming the variable (exit code 78). An empty value (`FOO=`)',
    'counts as unset. `.env.example` lists the same variables, commented;',
    '`node --env-file=.env coordinator/dist/main.js` runs the coordinator with a file. The quick start',
    '(`npm start`) needs none of the required ones: it runs an embedded PostgreSQL, finds or starts Redis and',
    'generates its secrets, and every other variable still applies (for example `PORT=9000 npm start`).',
    '',
    'Booleans accept `true`, `false`, `1`, `0`, `yes` and `no`.',
    '',
    '## Coordinator',
    '',
  ];
  for (const [heading, list] of groups) {
    if (!list.length) continue;
    out.push(`### ${heading}`, '', ...settingsTable(list), '');
  }
  out.push('## Quick start only', '', 'Read by `coordinator/src/quickstart.ts` (`npm start`).', '', ...settingsTable(QUICKSTART_SETTINGS), '');
  out.push(
    '## Worker agent',
    '',
    'Options of `sonar-worker` (`sonar-worker --help`); each also reads the environment variable named. A secret is',
    'required: `--secret` or `--secret-file`. The worker takes its own outbound allow-list, the counterpart of the',
    "coordinator's `OUTBOUND_ALLOW_RANGES` (see [URL sources](speech.md#url-sources)).",
    '',
    ...workerTable(),
    '',
    'Read by the transcription engines (`worker/src/engines/`):',
    '',
    ...settingsTable(WORKER_ENGINE_SETTINGS),
    '',
  );
  return out.join('\n');
}

/** Variables .env.example may show besides the coordinator's: the quick start's and Docker Compose's. */
const ENV_EXAMPLE_EXTRAS = new Set([
  ...QUICKSTART_SETTINGS.map((s) => s.name),
  'POSTGRES_PASSWORD',
  'POSTGRES_SHARED_BUFFERS',
  'POSTGRES_EFFECTIVE_CACHE_SIZE',
  'POSTGRES_SHM_SIZE',
  'WORKER_SECRET',
]);

/** What is wrong with .env.example's list of variables (`NAME=` or `# NAME=` lines): missing, unknown or repeated ones. */
export function envExampleProblems(text: string): string[] {
  const seen = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(?:# ?)?([A-Z][A-Z0-9_]+)=/.exec(line);
    if (m?.[1]) seen.set(m[1], (seen.get(m[1]) ?? 0) + 1);
  }
  const problems: string[] = [];
  for (const { name } of coordinatorSettings()) {
    const n = seen.get(name) ?? 0;
    if (n === 0) problems.push(`${name} is missing`);
    if (n > 1) problems.push(`${name} appears ${n} times`);
  }
  const known = new Set(Object.keys(envSchema.shape));
  for (const name of seen.keys()) if (!known.has(name) && !ENV_EXAMPLE_EXTRAS.has(name)) problems.push(`${name} is not a setting`);
  return problems;
}
