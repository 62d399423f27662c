// Renders the coordinator's OpenAPI document as the markdown reference docs/api.md. Pure: the same
// document always gives the same text (operations in the document's order, grouped by tag).

/** The parts of a JSON schema (as fastify-type-provider-zod emits them) the reference shows. */
export interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  description?: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  maxItems?: number;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
}

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: JsonSchema;
}

interface MediaContent {
  schema?: JsonSchema;
}

interface Operation {
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content?: Record<string, MediaContent> };
  responses?: Record<string, { description?: string; content?: Record<string, MediaContent> }>;
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string };
  paths: Record<string, Record<string, Operation>>;
}

/** How a route authenticates, from the coordinator's route table (`config.auth`). */
export type OperationAuth = 'public' | { accept: string[]; scope?: string; permissions?: string[]; adminOnly?: boolean; tokenLegacyTransports?: boolean };

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const CREDENTIALS: Record<string, string> = {
  session: 'browser session (cookie `sonar_session`; mutations need `X-CSRF-Token`)',
  jwt: 'JWT (`Authorization: Bearer`, from `POST /api/account/login`)',
  personal_token: 'personal access token (`Authorization: Bearer sonar_pat_…`)',
  dns_api_key: 'DNS API key (`X-API-Key`, `Authorization: Bearer` or `?api_key=`)',
  ip_whitelist: 'a whitelisted client address (no credential)',
};

/** Table cells hold one line; pipes would end the cell. */
const cell = (text: string) =>
  text
    .replace(/\r?\n+/g, ' ')
    .replace(/\|/g, '\\|')
    .trim();
const code = (text: string) => `\`${text}\``;

/** Large integer bounds zod puts on every int (±2^53−1) say nothing; others are shown. */
const SAFE = 9007199254740991;

/** A short type expression for a schema: `string`, `integer 1–100`, `"a" \| "b"`, `array of string`, `object`. */
export function schemaType(s: JsonSchema | undefined): string {
  if (!s) return 'any';
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives) return [...new Set(alternatives.map(schemaType))].join(' or ');
  if (s.allOf) return s.allOf.map(schemaType).join(' and ');
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  const parts = types.map((t) => {
    if (t === 'array') return `array of ${schemaType(s.items)}${s.maxItems !== undefined ? ` (≤ ${s.maxItems})` : ''}`;
    if (t === 'integer' || t === 'number') {
      const lo = s.minimum !== undefined && Math.abs(s.minimum) !== SAFE ? s.minimum : undefined;
      const hi = s.maximum !== undefined && Math.abs(s.maximum) !== SAFE ? s.maximum : undefined;
      return lo !== undefined && hi !== undefined ? `${t} ${lo}–${hi}` : lo !== undefined ? `${t} ≥ ${lo}` : hi !== undefined ? `${t} ≤ ${hi}` : t;
    }
    if (t === 'string') {
      if (s.format === 'binary') return 'file';
      const len = s.maxLength !== undefined ? ` (≤ ${s.maxLength} chars)` : '';
      return `${s.format ? `string (${s.format})` : 'string'}${len}`;
    }
    return t;
  });
  if (parts.length) return parts.join(' or ');
  return s.properties ? 'object' : 'any';
}

/** One table row per property, nested objects (and arrays of objects) one level down as `parent.child`. */
function fieldRows(schema: JsonSchema | undefined, prefix = '', depth = 0): string[] {
  const props = schema?.properties ?? (schema?.items?.properties ? schema.items.properties : undefined);
  if (!props) return [];
  const required = new Set(schema?.properties ? (schema.required ?? []) : (schema?.items?.required ?? []));
  const rows: string[] = [];
  for (const [name, prop] of Object.entries(props)) {
    const notes = [prop.description ?? '', prop.default !== undefined ? `default ${code(JSON.stringify(prop.default))}` : ''].filter(Boolean).join('; ');
    rows.push(`| ${code(prefix + name)} | ${cell(schemaType(prop))} | ${required.has(name) ? 'yes' : 'no'} | ${cell(notes)} |`);
    const nested = prop.properties ? prop : prop.items?.properties ? prop.items : undefined;
    if (nested && depth < 1) rows.push(...fieldRows(nested, `${prefix}${name}${prop.items ? '[]' : ''}.`, depth + 1));
  }
  return rows;
}

function authText(auth: OperationAuth | undefined): string {
  if (auth === undefined) return 'not declared';
  if (auth === 'public') return 'public (no credential)';
  const accepted = auth.accept.map((a) => CREDENTIALS[a] ?? a);
  if (auth.tokenLegacyTransports) accepted.push('the same token as `X-Api-Key` or `?apikey=`');
  const needs = [
    auth.scope ? `token scope ${code(auth.scope)}` : '',
    auth.permissions?.length ? `permission ${auth.permissions.map(code).join(' and ')}` : '',
    auth.adminOnly ? 'administrators only' : '',
  ].filter(Boolean);
  return `${accepted.join('; or ')}${needs.length ? `. Needs ${needs.join(', ')}` : ''}`;
}

/** The markdown anchor GitHub-style renderers give a heading. */
const anchor = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');

function renderOperation(method: string, path: string, op: Operation, auth: OperationAuth | undefined): string[] {
  const out: string[] = [`### ${method.toUpperCase()} ${path}`, ''];
  if (op.summary) out.push(`${op.summary.trim()}${/[.!?]$/.test(op.summary.trim()) ? '' : '.'}`, '');
  if (op.description) out.push(op.description.trim(), '');
  out.push(`**Auth:** ${authText(auth)}.`, '');

  const params = op.parameters ?? [];
  if (params.length) {
    out.push('**Parameters**', '', '| name | in | type | required | notes |', '|---|---|---|---|---|');
    for (const p of params) {
      const notes = [p.description ?? p.schema?.description ?? '', p.schema?.default !== undefined ? `default ${code(JSON.stringify(p.schema.default))}` : '']
        .filter(Boolean)
        .join('; ');
      out.push(`| ${code(p.name)} | ${p.in} | ${cell(schemaType(p.schema))} | ${p.required ? 'yes' : 'no'} | ${cell(notes)} |`);
    }
    out.push('');
  }

  const body = op.requestBody?.content;
  if (body && Object.keys(body).length) {
    const types = Object.keys(body);
    const first = body[types[0]!]?.schema;
    out.push(`**Request body** (${types.map(code).join(', ')}${op.requestBody?.required ? '' : '; optional'})`, '');
    const rows = fieldRows(first);
    if (rows.length) out.push('| field | type | required | notes |', '|---|---|---|---|', ...rows, '');
    else out.push(schemaType(first), '');
  }

  const responses = Object.entries(op.responses ?? {});
  if (responses.length) {
    out.push('**Responses**', '', '| status | body |', '|---|---|');
    for (const [status, res] of responses) {
      const schema = res.content?.['application/json']?.schema;
      const props = schema?.properties ? Object.keys(schema.properties) : [];
      const text = props.length
        ? props.map((p) => code(p)).join(', ')
        : res.description && res.description !== 'Default Response'
          ? res.description
          : schema
            ? schemaType(schema)
            : '—';
      out.push(`| ${status} | ${cell(text)} |`);
    }
    out.push('');
    const ok = responses.find(([status]) => status.startsWith('2'));
    const okRows = fieldRows(ok?.[1].content?.['application/json']?.schema);
    if (ok && okRows.length) {
      out.push(
        `<details><summary>${ok[0]} body fields</summary>`,
        '',
        '| field | type | always | notes |',
        '|---|---|---|---|',
        ...okRows,
        '',
        '</details>',
        '',
      );
    }
  }
  return out;
}

/**
 * The reference: a header, a table of contents by tag, then every operation with method, path,
 * summary, auth, parameters, request body fields and responses. `authOf(method, path)` says how
 * a route authenticates (the document's own `security` lists are not complete).
 */
export function renderApiMarkdown(doc: OpenApiDocument, authOf: (method: string, path: string) => OperationAuth | undefined): string {
  const groups = new Map<string, Array<{ method: string; path: string; op: Operation }>>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const tag = op.tags?.[0] ?? path.split('/').filter(Boolean).slice(0, 2).join('/');
      const list = groups.get(tag) ?? [];
      list.push({ method, path, op });
      groups.set(tag, list);
    }
  }
  const out: string[] = [
    '# HTTP API reference',
    '',
    '<!-- Generated by `npm run docs:api` from the OpenAPI document the coordinator builds from its route schemas. Do not edit by hand: `npm test` fails when this file is stale. -->',
    '',
    `${doc.info.title}, version ${doc.info.version} (OpenAPI ${doc.openapi}). A running coordinator serves the same document at`,
    '`/openapi.json` and a browsable view at `/docs` (unless `OPENAPI_ENABLED=false`).',
    '',
  ];
  if (doc.info.description) out.push(doc.info.description.trim(), '');
  out.push(
    'Authentication, permissions and error shapes are described in [auth.md](auth.md);',
    'errors are listed per operation by status. Rate-limited routes answer 429 with `Retry-After`; while',
    'PostgreSQL or Redis is unreachable, routes answer 503 `service_unavailable` (see [operations](operations.md)).',
    '',
    '## Contents',
    '',
  );
  for (const [tag, ops] of groups) {
    out.push(`- [${tag}](#${anchor(tag)})`);
    for (const { method, path } of ops) out.push(`  - [${method.toUpperCase()} ${code(path)}](#${anchor(`${method} ${path}`)})`);
  }
  out.push('');
  for (const [tag, ops] of groups) {
    out.push(`## ${tag}`, '');
    for (const { method, path, op } of ops) out.push(...renderOperation(method, path, op, authOf(method, path)));
  }
  return `${out
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`;
}
