import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { MsIdentityStandIn } from './ms-identity.js';
import { listenOnLoopback } from './stub-server.js';

/** The delegated permissions the graph API's assistant chat needs (the scopes requested at sign-in). */
export const ASSISTANT_SCOPES = [
  'Sites.Read.All',
  'Mail.Read',
  'People.Read.All',
  'OnlineMeetingTranscript.Read.All',
  'Chat.Read',
  'ChannelMessage.Read.All',
  'ExternalItem.Read.All',
];

export type GraphMode = 'reply' | 'licence' | 'server_error' | 'garbage' | 'hang' | 'no_reply';

export interface GraphCall {
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
  status: number;
}

/**
 * A local stand-in for the two graph beta endpoints of the assistant (create a conversation, send a
 * chat turn), built from the public API documentation: it checks the bearer token against the
 * identity stand-in (signature, audience, `scp`) and answers with a reply, a 403 for a missing
 * licence, a 5xx, a non-JSON body, a response without a reply message, or never (hang).
 */
export class GraphStub {
  readonly calls: GraphCall[] = [];
  mode: GraphMode = 'reply';
  /** Accounts (object ids) without an assistant licence. */
  readonly unlicensed = new Set<string>();
  private server!: Server;
  private closeServer: () => Promise<void> = async () => {};
  port = 0;

  constructor(private readonly identity: MsIdentityStandIn) {}

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          let body: unknown;
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
          } catch {
            body = undefined;
          }
          const call: GraphCall = { path: req.url ?? '', headers: req.headers, body, status: 0 };
          this.calls.push(call);
          const send = (status: number, payload: unknown, raw = false) => {
            call.status = status;
            return res
              .writeHead(status, { 'content-type': raw ? 'text/html' : 'application/json', 'request-id': randomUUID() })
              .end(raw ? String(payload) : JSON.stringify(payload));
          };
          const error = (status: number, code: string, message: string) =>
            send(status, { error: { code, message, innerError: { date: new Date().toISOString(), 'request-id': randomUUID() } } });
          const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
          const claims = token ? await this.identity.verifyAccessToken(token) : null;
          if (!claims) return error(401, 'InvalidAuthenticationToken', 'Access token validation failure.');
          const scp = (typeof claims.scp === 'string' ? claims.scp : '').split(' ');
          const missing = ASSISTANT_SCOPES.filter((s) => !scp.includes(s));
          if (missing.length) return error(403, 'Forbidden', `Missing scope permissions on the request: ${missing.join(', ')}.`);
          if (req.method !== 'POST') return error(405, 'BadRequest', 'Method not allowed.');
          const chat = /^\/beta\/assistant\/conversations\/([^/]+)\/chat$/.exec(req.url ?? '');
          if (req.url !== '/beta/assistant/conversations' && !chat) return error(404, 'ResourceNotFound', 'Resource not found.');
          if (this.mode === 'hang') return; // never answers; the socket stays open until the stub stops
          if (this.mode === 'server_error') return error(503, 'ServiceUnavailable', 'The service is temporarily unavailable.');
          if (this.mode === 'garbage') return send(200, '<html><body>Gateway says hi</body></html>', true);
          if (this.unlicensed.has(String(claims.oid)) || this.mode === 'licence') {
            return error(403, 'Forbidden', 'The user does not have a valid license for the organization assistant.');
          }
          const now = new Date().toISOString();
          if (!chat) return send(201, { id: randomUUID(), createdDateTime: now, displayName: '', state: 'active', turnCount: 0 });
          const b = body as { message?: { text?: unknown }; locationHint?: { timeZone?: unknown } } | null | undefined;
          if (typeof b?.message?.text !== 'string' || typeof b.locationHint?.timeZone !== 'string') {
            return error(400, 'BadRequest', 'message.text and locationHint.timeZone are required.');
          }
          if (this.mode === 'no_reply') return send(200, { id: chat[1], createdDateTime: now, displayName: '', state: 'active', turnCount: 1, messages: [] });
          return send(200, {
            id: chat[1],
            createdDateTime: now,
            displayName: 'Conversation',
            state: 'active',
            turnCount: 1,
            messages: [
              { '@odata.type': '#microsoft.graph.copilotConversationRequestMessage', id: randomUUID(), text: b.message.text, createdDateTime: now },
              {
                '@odata.type': '#microsoft.graph.copilotConversationResponseMessage',
                id: randomUUID(),
                text: `Assistant reply for ${String(claims.upn)}: ${b.message.text.split('\n')[0]}`,
                createdDateTime: now,
                adaptiveCards: [],
                attributions: [],
              },
            ],
          });
        })();
      });
    });
    const listening = await listenOnLoopback(this.server);
    this.port = listening.port;
    this.closeServer = listening.close;
    return this;
  }

  async stop() {
    await this.closeServer();
  }
}
