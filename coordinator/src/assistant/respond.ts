import { randomUUID } from 'node:crypto';
import type { AccountInfo, AuthenticationResult, ConfidentialClientApplication } from '@azure/msal-node';
import type { Redis } from 'ioredis';
import type { AuthUser } from '../accounts/types.js';
import type { Config } from '../config.js';
import type { AssistantAuditLog, AuditEntry } from './audit-log.js';
import { AssistantError } from './errors.js';
import { composeChat, UpstreamFailure, type GraphAssistant, type PromptFields } from './graph-assistant.js';
import { loadMsal } from './msal.js';
import type { AssistantRepository, ConnectionRow, SetupRow, Validation } from './repository.js';
import { adviceFor, identityProviderCode, resourceScopes } from './validation.js';

export interface RespondResult {
  ok: true;
  reply: string;
  connector: { slug: string; display_name: string; tenant_id: string | null; account: string | null; conversation_id: string };
  diagnostics: {
    provider: 'graph_assistant';
    upstream: string;
    request_id: string;
    upstream_request_id: string | null;
    correlation_id: string;
    token_source: 'cache' | 'refresh';
    time_zone: string;
    web_search: boolean;
    duration_ms: number;
    ignored_fields: string[];
  };
}

export type RespondFields = PromptFields & { connector_slug?: string | undefined; ignored?: string[] };
export interface RespondContext {
  requestId: string;
  slug?: string;
  action?: 'request' | 'prompt_test';
}

/** What answering a prompt needs of the connector (AssistantService). */
export interface ResponderDeps {
  audit: AssistantAuditLog;
  repo: AssistantRepository;
  graph: GraphAssistant;
  /** Per-user request budget; the admin CLI, which sends no prompts, has none. */
  redis: Pick<Redis, 'incr' | 'expire'> | null;
  config: Pick<Config, 'ASSISTANT_RATE_LIMIT_PER_MINUTE' | 'REDIS_KEY_PREFIX'>;
  /** Where a user (re)connects their account. */
  pageUrl: string;
  /** The setup's MSAL client, with the user's encrypted token cache. */
  client(setup: SetupRow, cache: { userId: number; setupId: number }): Promise<ConfidentialClientApplication>;
  /** validateTokenResponse plus the ID token's signature and issuer. */
  validate(setup: SetupRow, result: AuthenticationResult): Promise<Validation>;
}

/** One connected user's setup and connection, found and checked. */
interface Connected {
  setup: SetupRow;
  connection: ConnectionRow & { home_account_id: string };
}

/** A token ready for the upstream call. */
interface Token {
  account: AccountInfo;
  token: AuthenticationResult;
  correlationId: string;
  validation: Validation;
}

/**
 * A prompt answered through the user's connection: the setup and connection checked, a token
 * through MSAL's cache (refreshed by MSAL when due) validated before the upstream call, the graph
 * API's assistant conversation, and every step in the audit log.
 */
export class Responder {
  constructor(private readonly deps: ResponderDeps) {}

  private get reconnect() {
    return { reconnect_url: this.deps.pageUrl };
  }

  async respond(user: AuthUser, fields: RespondFields, ctx: RespondContext): Promise<RespondResult> {
    const started = performance.now();
    const action = ctx.action ?? 'request';
    const audit: AuditEntry = { action, result: 'ok', userId: user.id, username: user.username, requestId: ctx.requestId };
    if (fields.connector_slug && !ctx.slug && !user.isAdmin) {
      await this.deps.audit.record({ ...audit, result: 'refused', errorCode: 'connector_slug_admin_only' });
      throw new AssistantError(403, 'connector_slug_admin_only', '`connector_slug` is an administrator-only override.');
    }
    await this.rateLimit(user.id);
    const connected = await this.connected(user, ctx.slug ?? fields.connector_slug, audit);
    const token = await this.token(user, connected, audit);
    return this.ask(user, connected, token, fields, ctx, audit, started);
  }

  /** The setup (named, or the user's latest connection's) and a usable connection on it; `audit` gains the setup and tenant. */
  private async connected(user: AuthUser, slug: string | undefined, audit: AuditEntry): Promise<Connected> {
    const { audit: log, repo } = this.deps;
    let setup: SetupRow | null;
    let connection: ConnectionRow | null;
    if (slug) {
      setup = await repo.setupBySlug(slug);
      if (!setup) {
        await log.record({ ...audit, result: 'refused', errorCode: 'unknown_connector' });
        throw new AssistantError(422, 'unknown_connector', `connector_slug: there is no assistant setup "${slug}".`, {
          errors: { connector_slug: ['unknown setup'] },
        });
      }
      connection = await repo.connection(user.id, setup.id);
    } else {
      connection = await repo.latestConnection(user.id);
      setup = connection ? await repo.setupById(connection.setup_id) : null;
    }
    audit.setupSlug = setup?.slug ?? null;
    const pageUrl = this.deps.pageUrl;
    if (!setup || !connection || !connection.home_account_id || !connection.token_cache_enc) {
      await log.record({ ...audit, result: 'refused', errorCode: 'not_connected' });
      throw new AssistantError(
        409,
        'not_connected',
        `No assistant account is connected for you${setup ? ` on setup "${setup.slug}"` : ''}: connect one on ${pageUrl}.`,
        this.reconnect,
      );
    }
    audit.tenantId = connection.tenant_id;
    if (!user.isAdmin && !(await repo.delegatedSetupIds(user.id)).includes(setup.id)) {
      await log.record({ ...audit, result: 'refused', errorCode: 'setup_not_delegated' });
      throw new AssistantError(403, 'setup_not_delegated', `The setup "${setup.slug}" is no longer delegated to you.`);
    }
    if (connection.status === 'reconnect_required') {
      await log.record({ ...audit, result: 'reconnect_required', errorCode: 'reconnect_required' });
      throw new AssistantError(409, 'reconnect_required', `The assistant account must be reconnected: ${pageUrl}.`, this.reconnect);
    }
    if (connection.status === 'invalid') {
      const v = connection.last_validation;
      await log.record({ ...audit, result: 'refused', errorCode: v?.code ?? 'validation_failed' });
      throw new AssistantError(403, v?.code ?? 'validation_failed', v?.message ?? 'The connection did not pass validation; connect again.', {
        ...this.reconnect,
        ...(v?.missing_scopes.length ? { missing_scopes: v.missing_scopes } : {}),
      });
    }
    return { setup, connection: { ...connection, home_account_id: connection.home_account_id } };
  }

  /** A token through MSAL's cache (refreshed by MSAL when due), validated before the upstream call. */
  private async token(user: AuthUser, { setup, connection }: Connected, audit: AuditEntry): Promise<Token> {
    const { audit: log, repo } = this.deps;
    const client = await this.deps.client(setup, { userId: user.id, setupId: setup.id });
    const account = await client.getTokenCache().getAccountByHomeId(connection.home_account_id);
    if (!account) {
      await this.markReconnect(user, setup, connection, 'token_cache_empty', 'The stored sign-in is gone; connect again.');
      await log.record({ ...audit, result: 'reconnect_required', errorCode: 'token_cache_empty' });
      throw new AssistantError(409, 'reconnect_required', `The assistant account must be reconnected: ${this.deps.pageUrl}.`, this.reconnect);
    }
    const correlationId = randomUUID();
    let token: AuthenticationResult;
    try {
      token = await client.acquireTokenSilent({ account, scopes: resourceScopes(setup.scopes), correlationId });
    } catch (err) {
      throw await this.refreshFailed(err, user, { setup, connection }, audit, correlationId);
    }
    if (!token.fromCache) await log.record({ ...audit, action: 'refresh', result: 'ok', correlationId });
    const validation = await this.deps.validate(setup, token);
    if (!validation.ok) {
      await repo.setStatus(user.id, setup.id, 'invalid', validation);
      await log.record({ ...audit, action: 'validation', result: 'refused', correlationId, errorCode: validation.code });
      await log.record({ ...audit, result: 'refused', correlationId, errorCode: validation.code });
      throw new AssistantError(
        403,
        validation.code ?? 'validation_failed',
        validation.message,
        validation.missing_scopes.length ? { missing_scopes: validation.missing_scopes, ...this.reconnect } : this.reconnect,
      );
    }
    await log.record({ ...audit, action: 'validation', result: 'ok', correlationId });
    return { account, token, correlationId, validation };
  }

  /** A silent token request failed: reconnect when the sign-in needs the user again, else the provider is unreachable. */
  private async refreshFailed(
    err: unknown,
    user: AuthUser,
    { setup, connection }: Connected,
    audit: AuditEntry,
    correlationId: string,
  ): Promise<AssistantError> {
    const log = this.deps.audit;
    const e = err as { errorCode?: string; errorMessage?: string; message?: string };
    const code = identityProviderCode(e.errorMessage ?? e.message) ?? e.errorCode ?? 'refresh_failed';
    const { InteractionRequiredAuthError } = await loadMsal();
    const interaction =
      err instanceof InteractionRequiredAuthError ||
      /invalid_grant|no_tokens_found|interaction_required|login_required|consent_required|refresh_token_expired|bad_token/i.test(e.errorCode ?? '');
    await log.record({ ...audit, action: 'refresh', result: interaction ? 'reconnect_required' : 'failed', correlationId, errorCode: code });
    if (interaction) {
      await this.markReconnect(user, setup, connection, code, `The sign-in can no longer be refreshed (${code}); connect again.`);
      await log.record({ ...audit, result: 'reconnect_required', correlationId, errorCode: code });
      return new AssistantError(409, 'reconnect_required', `The assistant account must be reconnected (${code}): ${this.deps.pageUrl}.`, {
        ...this.reconnect,
        identity_provider_code: code,
        action: adviceFor(identityProviderCode(code)),
      });
    }
    await log.record({ ...audit, result: 'upstream_error', correlationId, errorCode: code });
    return new AssistantError(502, 'identity_provider_unreachable', 'The identity provider could not refresh the sign-in (unreachable or an unusable answer).');
  }

  /** The upstream call and its answer; upstream failures become connector errors (and connection states). */
  private async ask(
    user: AuthUser,
    { setup, connection }: Connected,
    { account, token, correlationId, validation }: Token,
    fields: RespondFields,
    ctx: RespondContext,
    audit: AuditEntry,
    started: number,
  ): Promise<RespondResult> {
    const { audit: log, repo } = this.deps;
    const chat = composeChat(fields, setup.time_zone);
    try {
      const reply = await this.deps.graph.chat(setup.graph_url, token.accessToken, chat);
      if (connection.status !== 'ready') await repo.setStatus(user.id, setup.id, 'ready', validation);
      await log.record({ ...audit, result: 'ok', correlationId: reply.requestId ?? correlationId });
      return {
        ok: true,
        reply: reply.text,
        connector: {
          slug: setup.slug,
          display_name: setup.display_name,
          tenant_id: validation.tenant_id,
          account: account.username || null,
          conversation_id: reply.conversationId,
        },
        diagnostics: {
          provider: 'graph_assistant',
          upstream: `${setup.graph_url}/beta/assistant/conversations`,
          request_id: ctx.requestId,
          upstream_request_id: reply.requestId,
          correlation_id: correlationId,
          token_source: token.fromCache ? 'cache' : 'refresh',
          time_zone: setup.time_zone,
          web_search: chat.contextualResources.webContext.isWebEnabled,
          duration_ms: Math.round(performance.now() - started),
          ignored_fields: fields.ignored ?? [],
        },
      };
    } catch (err) {
      if (!(err instanceof UpstreamFailure)) throw err;
      await log.record({
        ...audit,
        result: err.code === 'licence_missing' ? 'licence_missing' : 'upstream_error',
        correlationId: err.requestId ?? correlationId,
        errorCode: err.code,
      });
      if (err.code === 'licence_missing') {
        await repo.setStatus(user.id, setup.id, 'licence_missing', { ...validation, ok: false, code: 'licence_missing', message: err.message });
        throw new AssistantError(
          403,
          'licence_missing',
          `${err.message} An administrator assigns an assistant licence to the account, then the request can be repeated.`,
        );
      }
      if (err.code === 'upstream_forbidden') throw new AssistantError(403, 'permission_missing', err.message, this.reconnect);
      if (err.code === 'upstream_unauthorized') {
        await this.markReconnect(user, setup, connection, err.code, err.message);
        throw new AssistantError(409, 'reconnect_required', `${err.message} Reconnect the account: ${this.deps.pageUrl}.`, this.reconnect);
      }
      throw new AssistantError(502, err.code, err.message);
    }
  }

  private async markReconnect(user: AuthUser, setup: SetupRow, connection: ConnectionRow, code: string, message: string) {
    await this.deps.repo.setStatus(user.id, setup.id, 'reconnect_required', {
      ok: false,
      code,
      message,
      tenant_id: connection.tenant_id,
      missing_scopes: [],
      at: new Date().toISOString(),
    });
  }

  /** Requests per user and minute (ASSISTANT_RATE_LIMIT_PER_MINUTE), counted in Redis after authentication. */
  private async rateLimit(userId: number) {
    const minute = Math.floor(Date.now() / 60_000);
    const key = `${this.deps.config.REDIS_KEY_PREFIX}assistant:rl:${userId}:${minute}`;
    const redis = this.deps.redis;
    if (!redis) return;
    const n = await redis.incr(key);
    if (n === 1) await redis.expire(key, 120);
    if (n > this.deps.config.ASSISTANT_RATE_LIMIT_PER_MINUTE) {
      const retry = 60 - Math.floor((Date.now() / 1000) % 60);
      throw new AssistantError(
        429,
        'rate_limited',
        `At most ${this.deps.config.ASSISTANT_RATE_LIMIT_PER_MINUTE} assistant requests per minute; retry in ${retry} s.`,
        { retry_after: retry },
      );
    }
  }
}
