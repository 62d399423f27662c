import { UpstreamUnreachable, type UpstreamHttp } from './upstream-http.js';

/** Fields of POST /api/ai/assistant/respond that shape the prompt. */
export interface PromptFields {
  context?: string | undefined;
  user_prompt?: string | undefined;
  modifier?: string | undefined;
  previous_reply?: string | undefined;
  mood?: string | undefined;
  custom_mood?: string | undefined;
  instructions?: string[] | undefined;
  custom_instruction?: string | undefined;
  response_language?: string | undefined;
  use_web_search?: boolean | undefined;
  web_search_required?: boolean | undefined;
}

/** The body of `POST …/conversations/{id}/chat`. */
export interface ChatRequest {
  message: { text: string };
  locationHint: { timeZone: string };
  additionalContext?: Array<{ text: string; description: string }>;
  contextualResources: { webContext: { isWebEnabled: boolean } };
}

/**
 * How the request fields become one chat turn (README "Organization assistant connector"):
 * `user_prompt` (or, without one, "Write a reply to the context") opens the message; `modifier`,
 * the mood, the instructions, the language and a web-search requirement follow as lines;
 * `context` and `previous_reply` travel as additional context; `use_web_search` switches the
 * assistant's web grounding; the setup's IANA time zone is the location hint the upstream needs.
 */
export function composeChat(f: PromptFields, timeZone: string): ChatRequest {
  const lines: string[] = [f.user_prompt?.trim() || 'Write a reply to the context provided.'];
  if (f.modifier) lines.push(f.previous_reply ? `Revise your previous reply: ${f.modifier}` : `Adjust the reply: ${f.modifier}`);
  const mood = f.mood === 'custom' || (!f.mood && f.custom_mood) ? f.custom_mood : f.mood;
  if (mood) lines.push(`Tone: ${mood}.`);
  const instructions = [...(f.instructions ?? []), ...(f.custom_instruction ? [f.custom_instruction] : [])];
  if (instructions.length) lines.push(`Follow these instructions: ${instructions.join('; ')}.`);
  if (f.response_language) lines.push(`Answer in the language with code "${f.response_language}".`);
  if (f.web_search_required) lines.push('Ground the answer in current web search results.');
  const additional = [
    ...(f.context ? [{ description: 'Context supplied with the request', text: f.context }] : []),
    ...(f.previous_reply ? [{ description: 'Your previous reply, to revise', text: f.previous_reply }] : []),
  ];
  return {
    message: { text: lines.join('\n') },
    locationHint: { timeZone },
    ...(additional.length ? { additionalContext: additional } : {}),
    contextualResources: { webContext: { isWebEnabled: Boolean(f.use_web_search || f.web_search_required) } },
  };
}

/** Why an upstream call gave no usable reply. */
export class UpstreamFailure extends Error {
  constructor(
    readonly code:
      'licence_missing' | 'upstream_forbidden' | 'upstream_unauthorized' | 'upstream_error' | 'upstream_invalid' | 'upstream_timeout' | 'upstream_unreachable',
    message: string,
    readonly status: number | null,
    readonly requestId: string | null,
  ) {
    super(message);
    this.name = 'UpstreamFailure';
  }
}

export interface AssistantReply {
  text: string;
  conversationId: string;
  messageId: string | null;
  requestId: string | null;
}

const RESPONSE_TYPE = /copilotConversationResponseMessage|assistantConversationResponseMessage|ResponseMessage$/i;

/** The graph API's assistant conversations: create one, then send the chat turn. */
export class GraphAssistant {
  constructor(private readonly http: UpstreamHttp) {}

  async chat(graphUrl: string, accessToken: string, body: ChatRequest): Promise<AssistantReply> {
    const base = `${graphUrl.replace(/\/+$/, '')}/beta/assistant/conversations`;
    const created = await this.post(base, accessToken, {});
    const id = (created.json as { id?: unknown } | null)?.id;
    if (typeof id !== 'string' || !id)
      throw new UpstreamFailure('upstream_invalid', 'The assistant created no conversation id.', created.status, created.requestId);
    const answer = await this.post(`${base}/${encodeURIComponent(id)}/chat`, accessToken, body);
    const messages = (answer.json as { messages?: unknown } | null)?.messages;
    const reply = Array.isArray(messages)
      ? [...(messages as Array<Record<string, unknown>>)]
          .reverse()
          .find((m) => typeof m?.text === 'string' && m.text.trim() && RESPONSE_TYPE.test(typeof m['@odata.type'] === 'string' ? m['@odata.type'] : ''))
      : undefined;
    if (!reply) throw new UpstreamFailure('upstream_invalid', 'The assistant answered without a response message.', answer.status, answer.requestId);
    return { text: String(reply.text), conversationId: id, messageId: typeof reply.id === 'string' ? reply.id : null, requestId: answer.requestId };
  }

  private async post(url: string, accessToken: string, body: unknown) {
    let res;
    try {
      res = await this.http.send(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
      });
    } catch (err) {
      if (err instanceof UpstreamUnreachable) {
        throw new UpstreamFailure(err.kind === 'timeout' ? 'upstream_timeout' : 'upstream_unreachable', `The graph API ${err.message}.`, null, null);
      }
      throw err;
    }
    const requestId = res.headers['request-id'] ?? res.headers['client-request-id'] ?? null;
    let json: unknown;
    try {
      json = JSON.parse(res.text);
    } catch {
      json = null;
    }
    if (res.status >= 200 && res.status < 300) {
      if (json === null || typeof json !== 'object')
        throw new UpstreamFailure('upstream_invalid', `The graph API answered ${res.status} without a JSON object.`, res.status, requestId);
      return { status: res.status, json, requestId };
    }
    const error = (json as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    const message = typeof error?.message === 'string' ? error.message.slice(0, 300) : '';
    const code = typeof error?.code === 'string' ? error.code.slice(0, 100) : '';
    if (res.status === 403 && /licen[cs]e/i.test(`${code} ${message}`)) {
      throw new UpstreamFailure('licence_missing', `The account has no assistant licence (${message || code}).`, 403, requestId);
    }
    if (res.status === 403)
      throw new UpstreamFailure('upstream_forbidden', `The graph API refused the request: ${message || code || 'forbidden'}.`, 403, requestId);
    if (res.status === 401) throw new UpstreamFailure('upstream_unauthorized', 'The graph API did not accept the access token.', 401, requestId);
    throw new UpstreamFailure('upstream_error', `The graph API answered ${res.status}${message ? `: ${message}` : ''}.`, res.status, requestId);
  }
}
