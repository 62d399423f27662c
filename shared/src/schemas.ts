import { z } from 'zod';
import { PERMISSIONS, TOKEN_SCOPES } from './permissions.js';

/** Error body used by every area except the chat-log archive: `{ok:false, reason, message, errors?}`. */
export const errorBodySchema = z.object({
  ok: z.literal(false),
  reason: z.string(),
  message: z.string(),
  errors: z.record(z.string(), z.array(z.string())).optional(),
});
export type ErrorBody = z.infer<typeof errorBodySchema>;

export const platformSchema = z.object({
  ok: z.literal(true),
  version: z.string(),
});

export const loginRequestSchema = z.object({
  username: z.string().min(1).max(200),
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
  name: z.string().trim().min(1).max(100),
  scopes: z.array(z.enum(TOKEN_SCOPES)).min(1),
  expires_in_days: z.number().int().min(1).max(3650).optional(),
});
