import { z } from 'zod';
import { PERMISSIONS, TOKEN_SCOPES } from './permissions.js';

/** Error body used by every area except the chat-log archive: `{ok:false, reason, message, errors?}`. */
/**
 * Control characters: C0 (U+0000 to U+001F) and DEL. PostgreSQL refuses NUL in text, and none of
 * them belongs in a name, a search term or a path segment.
 */
// eslint-disable-next-line no-control-regex -- the point of this pattern is to reject control characters
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/;
/** The same, but tab, line feed and carriage return are allowed (notes, free text). */
// eslint-disable-next-line no-control-regex -- the point of this pattern is to reject control characters
const NO_CONTROL_MULTILINE = /^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]*$/;

export const CONTROL_CHARACTERS_MESSAGE = 'must not contain control characters (such as NUL)';
export const CONTROL_CHARACTERS_MULTILINE_MESSAGE = 'must not contain control characters other than tab and line breaks (such as NUL)';

/**
 * The string type of every text input (body fields, query strings, path parameters): a string
 * that refuses NUL and the other control characters, so they end as a validation error naming the
 * field (422; 400 in the DNS API) instead of reaching the database. `multiline` allows tab, LF and
 * CR (free-text notes). `error` is the message for a value that is not a string. It is a plain
 * `z.ZodString`: chain `.trim()`, `.min()`, `.max()` and `.regex()` as usual.
 */
type StringError = Exclude<Parameters<typeof z.string>[0], string | undefined>['error'];

export function safeString(opts: { multiline?: boolean; error?: StringError } = {}): z.ZodString {
  const base = opts.error === undefined ? z.string() : z.string({ error: opts.error });
  return opts.multiline
    ? base.regex(NO_CONTROL_MULTILINE, { error: CONTROL_CHARACTERS_MULTILINE_MESSAGE })
    : base.regex(NO_CONTROL, { error: CONTROL_CHARACTERS_MESSAGE });
}

/**
 * A database id in a path or query: decimal digits only, 1 to 2,147,483,647 (PostgreSQL's integer).
 * `z.coerce.number()` alone would take " 1", "1 ", "0x10" and "1e3" as well; those are 422 here.
 */
export function idParam(max = 2_147_483_647) {
  return z.preprocess((v) => (typeof v === 'string' && /^[1-9][0-9]{0,15}$/.test(v) ? Number(v) : v), z.number().int().positive().max(max));
}

export const errorBodySchema = z.object({
  ok: z.literal(false),
  reason: z.string(),
  message: z.string(),
  errors: z.record(z.string(), z.array(z.string())).optional(),
});
export type ErrorBody = z.infer<typeof errorBodySchema>;

/** Error body of the chat-log archive: `{success:false, error}`. */
export const ircErrorBodySchema = z.object({
  success: z.literal(false),
  error: z.string(),
});

export const platformSchema = z.object({
  ok: z.literal(true),
  version: z.string(),
});

export const loginRequestSchema = z.object({
  username: safeString().min(1).max(200),
  password: z.string().min(1).max(1024),
});

export const userSummarySchema = z.object({
  id: z.number().int(),
  username: z.string(),
  email: z.string().nullable(),
  is_admin: z.boolean(),
  permissions: z.array(z.enum(PERMISSIONS)),
});

export const loginResponseSchema = z.object({
  ok: z.literal(true),
  token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  expires_at: z.string(),
  user: userSummarySchema,
});

export const tokenSummarySchema = z.object({
  id: z.number().int(),
  name: z.string(),
  scopes: z.array(z.enum(TOKEN_SCOPES)),
  prefix: z.string(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
  last_used_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
});

export const createTokenRequestSchema = z.object({
  name: safeString().trim().min(1).max(100),
  scopes: z.array(z.enum(TOKEN_SCOPES)).min(1),
  expires_in_days: z.number().int().min(1).max(3650).optional(),
});
