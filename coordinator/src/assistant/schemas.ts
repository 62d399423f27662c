import { z } from 'zod';
import { errorBodySchema, safeString, idParam } from '@sonar/shared';

const text = (max: number) => safeString({ multiline: true }).max(max);

/** Request of POST /api/ai/assistant/respond. */
export const respondBody = z
  .object({
    context: text(50_000).optional().describe('Material the reply is about (an e-mail, a thread); sent to the assistant as additional context'),
    user_prompt: text(10_000).optional().describe('What the assistant should do; opens the chat message'),
    modifier: text(2000).optional().describe('A change to apply ("shorter", "more formal"); with `previous_reply` it revises that reply'),
    previous_reply: text(50_000).optional().describe('The earlier reply to revise; sent as additional context'),
    mood: safeString().max(100).optional().describe('Tone of the reply (e.g. `friendly`, `formal`); `custom` takes `custom_mood`'),
    custom_mood: safeString().max(200).optional().describe('Free-text tone, used when `mood` is `custom` or absent'),
    instructions: z
      .union([safeString().max(500), z.array(safeString().max(500)).max(20)])
      .optional()
      .transform((v) => (v === undefined ? undefined : Array.isArray(v) ? v : [v]))
      .describe('Instruction(s) the reply must follow'),
    custom_instruction: text(2000).optional().describe('One more free-text instruction'),
    response_language: z
      .string()
      .regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, 'a language code such as en, sv or pt-BR')
      .optional()
      .describe('Language code of the reply'),
    use_web_search: z.boolean().optional().describe('Let the assistant ground the reply in web search (default false)'),
    web_search_required: z
      .boolean()
      .optional()
      .describe('The reply must be grounded in web search (implies `use_web_search`; `use_web_search: false` with it is 422)'),
    connector_slug: safeString().max(64).optional().describe('Administrator-only: the tenant setup to use instead of your most recent connection'),
    model: z.unknown().optional().describe('Ignored: the assistant selects its own model'),
    temperature: z.unknown().optional().describe('Ignored'),
    top_p: z.unknown().optional().describe('Ignored'),
    max_tokens: z.unknown().optional().describe('Ignored'),
    max_output_tokens: z.unknown().optional().describe('Ignored'),
    reasoning: z.unknown().optional().describe('Ignored'),
    reasoning_effort: z.unknown().optional().describe('Ignored'),
  })
  .refine((b) => Boolean(b.context?.trim() || b.user_prompt?.trim()), { message: 'send `context`, `user_prompt` or both', path: ['user_prompt'] })
  .refine((b) => !(b.web_search_required && b.use_web_search === false), {
    message: '`web_search_required` needs web search: leave `use_web_search` out or true',
    path: ['use_web_search'],
  });

export const respondResponse = z.object({
  ok: z.literal(true),
  reply: z.string().describe('The assistant’s response text'),
  connector: z
    .object({
      slug: z.string(),
      display_name: z.string(),
      tenant_id: z.string().nullable().describe('Organizational tenant of the connected account'),
      account: z.string().nullable().describe('User name of the connected work or school account'),
      conversation_id: z.string().describe('Upstream conversation id'),
    })
    .describe('Connector metadata'),
  diagnostics: z
    .object({
      provider: z.literal('graph_assistant').describe('Always the organization’s assistant through the graph API: there is no other provider'),
      upstream: z.string(),
      request_id: z.string(),
      upstream_request_id: z.string().nullable(),
      correlation_id: z.string(),
      token_source: z.enum(['cache', 'refresh']),
      time_zone: z.string(),
      web_search: z.boolean(),
      duration_ms: z.number().int(),
      ignored_fields: z.array(z.string()).describe('Fields of other AI providers that were sent and have no effect'),
    })
    .describe('Diagnostics'),
});

export const assistantErrorSchema = errorBodySchema.extend({
  code: z.string().optional().describe('Connector error code (`not_connected`, `reconnect_required`, `scope_missing`, `licence_missing`, `upstream_timeout`…)'),
  reconnect_url: z.string().optional().describe('Page where the account is connected or reconnected'),
  consent_url: z.string().optional(),
  missing_scopes: z.array(z.string()).optional().describe('Delegated permissions that were not granted'),
  identity_provider_code: z.string().optional().describe('Identity-provider error code (AADSTS…)'),
  action: z.string().optional().describe('What to do about it'),
});

export const auditQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  action: z.enum(['setup_save', 'delegate', 'connect_start', 'connect', 'refresh', 'validation', 'request', 'prompt_test']).optional(),
  user_id: idParam().optional(),
  before_id: idParam(Number.MAX_SAFE_INTEGER).optional(),
});

export const auditRowSchema = z.object({
  id: z.number().int(),
  at: z.string(),
  action: z.string(),
  result: z.string(),
  user_id: z.number().int().nullable(),
  username: z.string().nullable(),
  setup_slug: z.string().nullable(),
  tenant_id: z.string().nullable(),
  correlation_id: z.string().nullable(),
  request_id: z.string().nullable(),
  error_code: z.string().nullable(),
  detail: z.string().nullable(),
});

const validationSchema = z.object({
  ok: z.boolean(),
  code: z.string().nullable(),
  message: z.string(),
  tenant_id: z.string().nullable(),
  missing_scopes: z.array(z.string()),
  at: z.string(),
});

export const statusResponse = z.object({
  ok: z.literal(true),
  setups: z.array(
    z.object({
      slug: z.string(),
      display_name: z.string(),
      client_id: z.string(),
      credential_kind: z.enum(['secret', 'certificate']),
      redirect_uri: z.string(),
      graph_url: z.string(),
      authority_host: z.string(),
      scopes: z.array(z.string()),
      time_zone: z.string(),
      delegates: z.array(z.object({ id: z.number().int(), username: z.string() })),
      updated_at: z.string(),
    }),
  ),
  connections: z.array(
    z.object({
      setup_slug: z.string(),
      status: z.enum(['ready', 'reconnect_required', 'licence_missing', 'invalid']),
      tenant_id: z.string().nullable(),
      account: z.string().nullable(),
      connected_at: z.string().nullable(),
      last_validation: validationSchema.nullable(),
    }),
  ),
});
