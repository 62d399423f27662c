import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { listenOnLoopback } from './stub-server.js';

/**
 * A local OpenAI-compatible server for the tests: `POST /v1/chat/completions` as the public API
 * reference describes it, answering a whole `chat.completion` object, or with `stream: true`
 * server-sent events of `chat.completion.chunk` objects ending in `data: [DONE]`; errors as
 * `{"error": {"message", "type", "code"}}` with their HTTP status. Every request is recorded.
 *
 * What it answers is scripted per test (`answer`); by default it behaves like a tiny, obedient
 * model (`defaultReply`) that reads the `Task:` line of the system prompt.
 */

export interface StubRequest {
  /** The parsed JSON body. */
  body: {
    model: string;
    messages: Array<{ role: string; content: string }>;
    stream?: boolean;
    response_format?: { type: string };
    max_tokens?: number;
  };
  headers: IncomingHttpHeaders;
  /** The `Task:` line of the system prompt (analysis, analysis-part, analysis-merge, translation, translate-analysis, title). */
  task: string;
  system: string;
  user: string;
  /** Whether the client went away before the answer (an aborted request). */
  aborted: boolean;
}

/** What one request gets: a reply text (after a delay), or an error status. */
export type StubAnswer =
  | { content: string; delayMs?: number; finishReason?: 'stop' | 'length' }
  | { status: number; message?: string; delayMs?: number; headers?: Record<string, string> };

export type StubScript = (req: StubRequest, nthOfTask: number) => StubAnswer | undefined;

/** The target language code named in a prompt ("… into German (de)" / "… in German (de)."). */
export function promptLanguage(system: string): string | null {
  return /(?:into|in) [^\n(]*\(([a-zA-Z-]+)\)/.exec(system)?.[1] ?? null;
}

/** The obedient model: plausible JSON for each task, derived from the request. */
export function defaultReply(req: StubRequest): string {
  const lang = promptLanguage(req.system) ?? 'xx';
  switch (req.task) {
    case 'analysis':
    case 'analysis-part': {
      const speakers = [...new Set([...req.user.matchAll(/\] ([^:\n]+):/g)].map((m) => m[1]!))];
      return JSON.stringify({
        summary: `[${lang}] ${req.task === 'analysis-part' ? 'part' : 'whole'}: ${req.user.split('\n')[0]!.slice(0, 60)}`,
        key_points: [`[${lang}] ${req.user.length} characters`],
        action_items: speakers.length ? speakers.map((s) => `[${lang}] follow up with ${s}`) : [],
        topics: ['meeting'],
      });
    }
    case 'analysis-merge': {
      const parts = JSON.parse(req.user) as Array<{ summary: string; key_points: string[]; action_items: string[]; topics: string[] }>;
      return JSON.stringify({
        summary: `[${lang}] merged ${parts.length} parts`,
        key_points: parts.flatMap((p) => p.key_points),
        action_items: [...new Set(parts.flatMap((p) => p.action_items))],
        topics: [...new Set(parts.flatMap((p) => p.topics))],
      });
    }
    case 'translation': {
      const { segments } = JSON.parse(req.user) as { segments: Array<{ seq: number; text: string }> };
      return JSON.stringify({ segments: segments.map((s) => ({ seq: s.seq, text: `[${lang}] ${s.text}` })) });
    }
    case 'translate-analysis': {
      const a = JSON.parse(req.user) as { summary: string; key_points: string[]; action_items: string[]; topics: string[] };
      const t = (s: string) => `[${lang}] ${s}`;
      return JSON.stringify({ summary: t(a.summary), key_points: a.key_points.map(t), action_items: a.action_items.map(t), topics: a.topics.map(t) });
    }
    case 'title':
      return JSON.stringify({ title: 'Quarterly budget review' });
    default:
      return JSON.stringify({});
  }
}

export class OpenAiStub {
  readonly requests: StubRequest[] = [];
  private server!: Server;
  private closeServer: () => Promise<void> = async () => {};
  port = 0;
  /** Per-test behaviour; undefined answers fall back to the obedient model. */
  answer: StubScript = () => undefined;

  get baseUrl() {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
          this.error(res, 404, `Unknown path ${req.method} ${req.url}`);
          return;
        }
        let body: StubRequest['body'];
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as StubRequest['body'];
        } catch {
          this.error(res, 400, 'The body is not JSON.');
          return;
        }
        const system = body.messages.find((m) => m.role === 'system')?.content ?? '';
        const user = body.messages.find((m) => m.role === 'user')?.content ?? '';
        const task = /^Task: (\S+)/.exec(system)?.[1] ?? '';
        const record: StubRequest = { body, headers: req.headers, task, system, user, aborted: false };
        const nth = this.requests.filter((r) => r.task === task).length + 1;
        this.requests.push(record);
        res.on('close', () => {
          if (!res.writableFinished) record.aborted = true;
        });
        const answer = this.answer(record, nth) ?? { content: defaultReply(record) };
        setTimeout(() => {
          if (res.destroyed) return;
          if ('status' in answer) this.error(res, answer.status, answer.message ?? 'stub error', answer.headers);
          else if (body.stream) this.stream(res, body.model, answer.content, answer.finishReason ?? 'stop');
          else this.complete(res, body.model, answer.content, answer.finishReason ?? 'stop');
        }, answer.delayMs ?? 0);
      });
    });
    const listening = await listenOnLoopback(this.server);
    this.port = listening.port;
    this.closeServer = listening.close;
    return this;
  }

  /** Requests of one task kind (optionally for one target language). */
  of(task: string, language?: string) {
    return this.requests.filter((r) => r.task === task && (language === undefined || promptLanguage(r.system) === language));
  }

  reset() {
    this.requests.length = 0;
    this.answer = () => undefined;
  }

  private error(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) {
    const type = status === 429 ? 'rate_limit_exceeded' : status >= 500 ? 'server_error' : 'invalid_request_error';
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify({ error: { message, type, param: null, code: null } }));
  }

  private complete(res: ServerResponse, model: string, content: string, finish: string) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: `chatcmpl-${this.requests.length}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: finish }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }),
    );
  }

  /** The reply as server-sent events: a role chunk, the content in a few pieces, the finish chunk, [DONE]. */
  private stream(res: ServerResponse, model: string, content: string, finish: string) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const id = `chatcmpl-${this.requests.length}`;
    const created = Math.floor(Date.now() / 1000);
    const chunk = (delta: Record<string, unknown>, finishReason: string | null) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] })}\n\n`;
    res.write(chunk({ role: 'assistant', content: '' }, null));
    const size = Math.max(1, Math.ceil(content.length / 4));
    for (let i = 0; i < content.length; i += size) res.write(chunk({ content: content.slice(i, i + size) }, null));
    res.write(chunk({}, finish));
    res.end('data: [DONE]\n\n');
  }

  async close() {
    await this.closeServer();
  }
}
