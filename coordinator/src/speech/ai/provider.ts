import type * as OpenAiSdk from 'openai';
import type { z } from 'zod';
import type { Config } from '../../config.js';

/** Why analysis, translations and titles are unavailable when no provider is configured. */
export const NO_PROVIDER_REASON = 'No AI provider is configured (OPENAI_BASE_URL/OPENAI_MODEL).';

/** Why they are unavailable for an owner without AI access. */
export const NO_ACCESS_REASON = 'The owner has no AI-provider access (permission provider_openai).';

/** Conservative characters per token for budgeting (multilingual text tokenises worse than English). */
export const CHARS_PER_TOKEN = 3;

export interface ChatMessage {
  role: 'system' | 'user';
  content: string;
}

/** A request the provider did not answer usefully: the upstream status (when it answered) and its reason, or why the reply is unusable. */
export class AiProviderError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
    this.name = 'AiProviderError';
  }
}

/** The request was aborted by us (coordinator shutdown): not a result, the work is tried again. */
export class AiAborted extends Error {
  constructor() {
    super('aborted by coordinator shutdown');
    this.name = 'AiAborted';
  }
}

type ProviderConfig = Pick<
  Config,
  | 'OPENAI_BASE_URL'
  | 'OPENAI_API_KEY'
  | 'OPENAI_MODEL'
  | 'OPENAI_TIMEOUT_SECONDS'
  | 'OPENAI_MAX_RETRIES'
  | 'OPENAI_CONTEXT_TOKENS'
  | 'OPENAI_MAX_OUTPUT_TOKENS'
  | 'OPENAI_JSON_MODE'
  | 'OPENAI_STREAM'
>;

/** One line, bounded: what goes into `error` of a failed state and the runtime log. */
const oneLine = (text: string, max = 500) => text.replace(/\s+/g, ' ').trim().slice(0, max);

/**
 * The OpenAI-compatible chat-completions provider, through the official `openai` client: it
 * already retries 408/409/429/5xx and connection failures with exponential backoff (honouring
 * Retry-After / retry-after-ms) and times requests out, so this module only configures it
 * (OPENAI_MAX_RETRIES, OPENAI_TIMEOUT_SECONDS) and turns its errors into one-line reasons with
 * the upstream status. Replies are JSON validated against a zod schema; an invalid reply is an
 * AiProviderError too (the work fails with that reason).
 */
export class AiProvider {
  readonly model: string;
  /** Where requests go, without credentials: "model at host". */
  readonly label: string;
  /** The `openai` package, loaded only when a provider is configured (this class exists only then), and its client. */
  private readonly sdk: Promise<{ sdk: typeof OpenAiSdk; client: OpenAiSdk.OpenAI }>;

  constructor(private readonly config: ProviderConfig & { OPENAI_BASE_URL: string; OPENAI_MODEL: string }) {
    this.model = config.OPENAI_MODEL;
    const base = new URL(config.OPENAI_BASE_URL);
    this.label = `${config.OPENAI_MODEL} at ${base.host}`;
    this.sdk = import('openai').then((sdk) => ({
      sdk,
      client: new sdk.OpenAI({
        baseURL: config.OPENAI_BASE_URL,
        // Local OpenAI-compatible servers often need no key; the client insists on one.
        apiKey: config.OPENAI_API_KEY ?? 'none',
        timeout: config.OPENAI_TIMEOUT_SECONDS * 1000,
        maxRetries: config.OPENAI_MAX_RETRIES,
      }),
    }));
  }

  /** Characters of input that fit one request next to `overheadChars` of instructions and the reply. */
  inputBudgetChars(overheadChars: number): number {
    const tokens = this.config.OPENAI_CONTEXT_TOKENS - this.config.OPENAI_MAX_OUTPUT_TOKENS;
    return Math.max(200, tokens * CHARS_PER_TOKEN - overheadChars);
  }

  /** Characters a reply may hold (max_tokens), for work whose reply is as long as its input (translations). */
  outputBudgetChars(): number {
    return this.config.OPENAI_MAX_OUTPUT_TOKENS * CHARS_PER_TOKEN;
  }

  /** One chat completion whose reply must be a JSON object matching `schema`. */
  async json<T>(messages: ChatMessage[], schema: z.ZodType<T>, signal?: AbortSignal): Promise<T> {
    const content = await this.complete(messages, signal);
    let value: unknown;
    try {
      value = JSON.parse(stripFence(content));
    } catch {
      throw new AiProviderError(`the model's reply is not valid JSON: ${oneLine(content, 120) || '(empty)'}`, null);
    }
    const parsed = schema.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue?.path.length ? issue.path.join('.') : 'reply';
      throw new AiProviderError(`the model's reply does not have the expected shape (${where}: ${issue?.message ?? 'invalid'})`, null);
    }
    return parsed.data;
  }

  private async complete(messages: ChatMessage[], signal?: AbortSignal): Promise<string> {
    const base = {
      model: this.model,
      messages,
      max_tokens: this.config.OPENAI_MAX_OUTPUT_TOKENS,
      temperature: 0.2,
      ...(this.config.OPENAI_JSON_MODE ? { response_format: { type: 'json_object' as const } } : {}),
    };
    const { sdk, client } = await this.sdk;
    try {
      if (this.config.OPENAI_STREAM) {
        const stream = await client.chat.completions.create({ ...base, stream: true }, { signal });
        let text = '';
        let finish: string | null = null;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta?.content ?? '';
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
        if (finish === 'length') throw new AiProviderError('the reply was cut off at max_tokens (raise OPENAI_MAX_OUTPUT_TOKENS)', null);
        return text;
      }
      const reply = await client.chat.completions.create(base, { signal });
      const choice = reply.choices[0];
      if (!choice) throw new AiProviderError('the provider answered without a choice', null);
      if (choice.finish_reason === 'length') throw new AiProviderError('the reply was cut off at max_tokens (raise OPENAI_MAX_OUTPUT_TOKENS)', null);
      return choice.message.content ?? '';
    } catch (err) {
      throw this.reason(err, sdk, signal);
    }
  }

  private reason(err: unknown, { APIConnectionTimeoutError, APIError, APIUserAbortError }: typeof OpenAiSdk, signal?: AbortSignal): Error {
    if (err instanceof AiProviderError) return err;
    if (signal?.aborted || err instanceof APIUserAbortError) return new AiAborted();
    if (err instanceof APIConnectionTimeoutError) {
      return new AiProviderError(`no answer from the provider within ${this.config.OPENAI_TIMEOUT_SECONDS} s`, null);
    }
    if (err instanceof APIError) {
      const retried = this.config.OPENAI_MAX_RETRIES;
      const after = retried ? ` (after ${retried} ${retried === 1 ? 'retry' : 'retries'})` : '';
      if (err.status === undefined) {
        const cause = (err as { cause?: { message?: string; code?: string } }).cause;
        return new AiProviderError(`could not reach the provider${after}: ${oneLine(cause?.code ?? cause?.message ?? err.message)}`, null);
      }
      // APIError's message is "<status> <upstream message>".
      return new AiProviderError(`the provider answered HTTP ${oneLine(err.message)}${after}`, Number(err.status));
    }
    return new AiProviderError(`the provider request failed: ${oneLine(err instanceof Error ? err.message : String(err))}`, null);
  }
}

/** Replies sometimes come wrapped in a Markdown code fence despite the instructions. */
function stripFence(text: string): string {
  const m = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/i.exec(text);
  return (m ? m[1]! : text).trim();
}

/** The configured provider, or null when OPENAI_BASE_URL or OPENAI_MODEL is unset. */
export function createAiProvider(config: ProviderConfig): AiProvider | null {
  const { OPENAI_BASE_URL, OPENAI_MODEL } = config;
  if (!OPENAI_BASE_URL || !OPENAI_MODEL) return null;
  return new AiProvider({ ...config, OPENAI_BASE_URL, OPENAI_MODEL });
}
