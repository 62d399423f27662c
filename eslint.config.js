// ESLint flat config: typescript-eslint's strict, type-aware rules for every workspace's sources and tests.
// Type information comes from the workspaces' tsconfig.json files (projectService); plain JavaScript
// (bench/*.mjs, build scripts) is linted without it.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';

/** Repository modules: the only sources (besides db/ and migrations) that hold SQL text. */
const SQL_REPOSITORIES = ['coordinator/src/**/*-repository.ts', 'coordinator/src/**/repository.ts'];
/** Speech's SQL has not moved yet (issue 40): it joins the boundary once it has. */
const SQL_EXEMPT_SPEECH = ['coordinator/src/speech/**'];
/** Files outside speech whose SQL has not moved into a repository yet; this list only shrinks. */
const SQL_NOT_YET_MOVED = ['coordinator/src/irc/archive-service.ts', 'coordinator/src/irc/event-store.ts'];
const SQL_KEYWORDS = String.raw`^\s*(select\s[\s\S]*\sfrom\s|insert\s+into\s|update\s+\w+\s+set\s|delete\s+from\s|with\s+\w+\s+as\s*\(|copy\s+\w+|(create|alter|drop)\s+(unlogged\s+)?(table|index)\s|truncate\s|begin\s*(;|transaction\s))`;
const SQL_TEXT_MESSAGE = 'SQL text belongs in a repository module (*-repository.ts) as a sql<Params, Row> statement (db/sql.ts).';
/** Ways to PostgreSQL other than db/sql.ts. */
const SQL_ACCESS = [
  {
    selector: "CallExpression[callee.property.name='raw']",
    message: 'knex raw(): declare the statement with sql<Params, Row> (db/sql.ts) in a repository module.',
  },
  {
    selector: "CallExpression[callee.property.name='execute'][callee.object.type='CallExpression'][callee.object.callee.property.name='getConnection']",
    message: 'getConnection().execute(): declare the statement with sql<Params, Row> (db/sql.ts) in a repository module.',
  },
  {
    selector: "CallExpression[callee.property.name='getConnection']",
    message: "MikroORM's connection: run sql<Params, Row> statements on dbOf(em) (db/sql.ts).",
  },
  {
    selector: "MemberExpression[property.name='client'][object.name=/^(knex|trx)$/]",
    message: "knex's untyped client: borrow a connection with borrowConnection/withConnection (db/sql.ts).",
  },
];
/** SQL text in a string or template literal. */
const SQL_TEXT = [
  { selector: `Literal[value=/${SQL_KEYWORDS}/i]`, message: SQL_TEXT_MESSAGE },
  { selector: `TemplateLiteral > TemplateElement:first-child[value.raw=/${SQL_KEYWORDS}/i]`, message: SQL_TEXT_MESSAGE },
];

export default defineConfig(
  globalIgnores(['**/dist/', '**/node_modules/', '**/.data/', 'coverage/', 'test-results/', 'worker/.whisper-build/', 'proto/generated/', 'proto/index.d.ts']),
  js.configs.recommended,
  tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // noUncheckedIndexedAccess is on: `!` is how the code states an index or lookup it has already checked.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Numbers and booleans in template strings (messages, SQL fragments, URLs) are intended.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // Fastify plugins/handlers and MikroORM migrations are async by contract, with or without an await.
      '@typescript-eslint/require-await': 'off',
      // `() => reply.send(x)` style one-line arrows are idiomatic here.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true, ignoreVoidOperator: true }],
      // A leading underscore marks a parameter or destructured field that is deliberately unused.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Rows from knex.raw()/pg are typed by cast but bigint/numeric columns arrive as strings: Number()/String() on them is needed.
      '@typescript-eslint/no-unnecessary-type-conversion': 'off',
      // Defensive checks on data the types call present (JSON, env, DB rows, socket payloads); 121 sites to review one by one.
      '@typescript-eslint/no-unnecessary-condition': 'off',
    },
  },
  {
    // Layering: the coordinator's shared layers (HTTP plumbing, database set-up, process and Redis
    // infrastructure, queues) serve every domain and import none of them, types included; a domain
    // that needs them imports them, and the wiring of domains into them lives in the top-level
    // modules (service.ts, deps.ts, entities.ts).
    files: ['coordinator/src/{http,db,infra,queue}/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: String.raw`^(\.\./)+(accounts|assistant|console|dns|irc|platform|speech)(/|$)`,
              message: 'http/, db/, infra/ and queue/ never import a domain folder: move the shared part here, or pass it in from the domain.',
            },
          ],
        },
      ],
    },
  },
  {
    // One SQL boundary (docs/architecture.md): SQL text lives in repository modules
    // (`*-repository.ts`, `repository.ts`) and migrations, and every statement goes through the typed
    // helper in db/sql.ts (`sql<Params, Row>`, borrowConnection/withConnection for COPY and
    // multi-statement work). Nowhere else takes knex's raw(), MikroORM's
    // getConnection().execute() or knex's untyped client.
    files: ['coordinator/src/**/*.ts'],
    ignores: [
      'coordinator/src/db/**',
      // Creates the database on a bare pg.Client of the embedded server's admin database, before any pool exists.
      'coordinator/src/infra/embedded-postgres.ts',
      // Speech joins once its SQL moves into its repositories (issue 40, speech part): until then it is exempt as a whole.
      ...SQL_EXEMPT_SPEECH,
      ...SQL_NOT_YET_MOVED,
    ],
    rules: { 'no-restricted-syntax': ['error', ...SQL_ACCESS, ...SQL_TEXT] },
  },
  {
    // Repository modules hold SQL text, but reach PostgreSQL only through db/sql.ts.
    files: SQL_REPOSITORIES,
    ignores: ['coordinator/src/db/**', ...SQL_EXEMPT_SPEECH, ...SQL_NOT_YET_MOVED],
    rules: { 'no-restricted-syntax': ['error', ...SQL_ACCESS] },
  },
  {
    // @tus/server's hooks reject with thrown `{ status_code, body }` objects, not Errors.
    files: ['coordinator/src/speech/uploads/tus-uploads.ts'],
    rules: { '@typescript-eslint/only-throw-error': 'off' },
  },
  {
    // Hand-written declarations for the untyped irc-framework package mirror its loose event API.
    files: ['coordinator/src/irc/irc-framework.d.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/test/**/*.ts', 'test/**/*.ts'],
    rules: {
      // Tests read untyped JSON bodies and mocks with `any`; the assertions are the type checks.
      '@typescript-eslint/no-explicit-any': 'off',
      // knex.raw() and pg results are `any` by library design; tests read them directly and assert on them.
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      globals: {
        console: 'readonly',
        process: 'readonly',
        URL: 'readonly',
        fetch: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        Buffer: 'readonly',
        URLSearchParams: 'readonly',
        AbortController: 'readonly',
      },
    },
  },
);
