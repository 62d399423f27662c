import { createHash, randomBytes, randomUUID, X509Certificate } from 'node:crypto';
import {
  ConfidentialClientApplication,
  CryptoProvider,
  InteractionRequiredAuthError,
  LogLevel,
  type AuthenticationResult,
  type Configuration,
  type ICachePlugin,
} from '@azure/msal-node';
import type { Redis } from 'ioredis';
import type { FastifyBaseLogger } from 'fastify';
import type { AuthUser } from '../accounts/types.js';
import type { Config } from '../config.js';
import type { Orm } from '../db/orm.js';
import { AssistantAuditLog, type AuditEntry } from './audit-log.js';
import { composeChat, GraphAssistant, UpstreamFailure, type PromptFields } from './graph-assistant.js';
import { AssistantRepository, type ConnectionRow, type SetupRow, type Validation } from './repository.js';
import { SecretBox } from './secret-box.js';
import { UpstreamHttp, UpstreamUnreachable } from './upstream-http.js';
import { IdTokenVerifier } from './id-token.js';
import { adviceFor, identityProviderCode, resourceScopes, validateTokenResponse } from './validation.js';

/** A connector error: HTTP status, machine code and what the caller can do (reconnect or consent link, missing scopes). */
export class AssistantError extends Error {
  constructor(
    readonly status: 401 | 403 | 404 | 409 | 422 | 429 | 502 | 503,
    readonly code: string,
    message: string,
    readonly extra: {
      reconnect_url?: string;
      consent_url?: string;
      missing_scopes?: string[];
      identity_provider_code?: string;
      action?: string;
      retry_after?: number;
      errors?: Record<string, string[]>;
    } = {},
  ) {
    super(message);
    this.name = 'AssistantError';
  }
}

export interface SetupInput {
  slug: string;
  display_name: string;
  client_id: string;
  credential_kind: 'secret' | 'certificate';
  /** The client secret, or the certificate's private key and certificate (PEM); undefined when editing keeps the saved one. */
  client_secret?: string | undefined;
  certificate_pem?: string | undefined;
  private_key_pem?: string | undefined;
  redirect_uri: string;
  graph_url: string;
  authority_host: string;
  scopes: string[];
  time_zone: string;
}

export interface SetupView {
  slug: string;
  display_name: string;
  client_id: string;
  credential_kind: 'secret' | 'certificate';
  redirect_uri: string;
  graph_url: string;
  authority_host: string;
  scopes: string[];
  time_zone: string;
  delegates: Array<{ id: number; username: string }>;
  updated_at: string;
}

export interface ConnectionView {
  setup_slug: string;
  status: ConnectionRow['status'];
  tenant_id: string | null;
  account: string | null;
  connected_at: string | null;
  last_validation: Validation | null;
}

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

type Credential = { kind: 'secret'; secret: string } | { kind: 'certificate'; privateKey: string; certificate: string };

/** Fields of other AI providers a caller may send: accepted and reported back as ignored. */
export const IGNORED_FIELDS = ['model', 'temperature', 'top_p', 'max_tokens', 'max_output_tokens', 'reasoning', 'reasoning_effort'] as const;

const SIGN_IN_TTL_SECONDS = 600;
const sha256 = (v: string) => createHash('sha256').update(v).digest('hex');

/**
 * The organization assistant connector: tenant setups and their delegation, the delegated
 * sign-in (MSAL confidential client, authorization code with PKCE through the `organizations`
 * authority), token validation, the graph API's assistant conversations, and the audit log.
 */
export class AssistantService {
  readonly audit: AssistantAuditLog;
  readonly repo: AssistantRepository;
  private readonly box: SecretBox | null;
  private readonly http: UpstreamHttp;
  private readonly graph: GraphAssistant;
  private readonly idTokens: IdTokenVerifier;

  constructor(
    private readonly deps: {
      orm: Orm;
      /** Per-user request budget; the admin CLI, which sends no prompts, has none. */
      redis: Pick<Redis, 'incr' | 'expire'> | null;
      config: Pick<
        Config,
        | 'ASSISTANT_SECRET_KEY'
        | 'ASSISTANT_EXTRA_CA_FILE'
        | 'ASSISTANT_UPSTREAM_TIMEOUT_SECONDS'
        | 'ASSISTANT_RATE_LIMIT_PER_MINUTE'
        | 'PUBLIC_BASE_URL'
        | 'REDIS_KEY_PREFIX'
      >;
      log: Pick<FastifyBaseLogger, 'warn'>;
    },
    http?: UpstreamHttp,
  ) {
    this.audit = new AssistantAuditLog(deps.orm);
    this.repo = new AssistantRepository(deps.orm);
    this.box = deps.config.ASSISTANT_SECRET_KEY ? new SecretBox(deps.config.ASSISTANT_SECRET_KEY) : null;
    this.http = http ?? new UpstreamHttp(deps.config.ASSISTANT_UPSTREAM_TIMEOUT_SECONDS * 1000, deps.config.ASSISTANT_EXTRA_CA_FILE);
    this.graph = new GraphAssistant(this.http);
    this.idTokens = new IdTokenVerifier(this.http);
  }

  close() {
    return this.http.close();
  }

  get pageUrl() {
    return `${this.deps.config.PUBLIC_BASE_URL}/admin/assistant`;
  }

  get defaultRedirectUri() {
    return `${this.deps.config.PUBLIC_BASE_URL}/admin/assistant/callback`;
  }

  private requireBox(): SecretBox {
    if (!this.box)
      throw new AssistantError(
        409,
        'not_configured',
        'The assistant connector is not configured: set ASSISTANT_SECRET_KEY (the key that encrypts setup secrets and token caches).',
      );
    return this.box;
  }

  // ---- setups ----------------------------------------------------------------------------------

  async setupsFor(user: AuthUser): Promise<SetupView[]> {
    const rows = await this.repo.setups();
    const mine = user.isAdmin ? null : new Set(await this.repo.delegatedSetupIds(user.id));
    const visible = rows.filter((s) => !mine || mine.has(s.id));
    return Promise.all(visible.map(async (s) => this.present(s, user.isAdmin ? await this.repo.delegates(s.id) : [])));
  }

  private present(s: SetupRow, delegates: Array<{ id: number; username: string }>): SetupView {
    return {
      slug: s.slug,
      display_name: s.display_name,
      client_id: s.client_id,
      credential_kind: s.credential_kind,
      redirect_uri: s.redirect_uri,
      graph_url: s.graph_url,
      authority_host: s.authority_host,
      scopes: s.scopes,
      time_zone: s.time_zone,
      delegates,
      updated_at: new Date(s.updated_at).toISOString(),
    };
  }

  /** Creates a setup, or replaces the settings of an existing one (`existing`); credentials left empty while editing stay as saved. */
  async saveSetup(input: SetupInput, actor: AuthUser, existing?: string): Promise<SetupView> {
    if (!actor.isAdmin) throw new AssistantError(403, 'forbidden', 'Only administrators manage tenant setups.');
    const box = this.requireBox();
    const errors = validateSetup(input);
    const current = existing ? await this.repo.setupBySlug(existing) : null;
    if (existing && !current) throw new AssistantError(404, 'not_found', `There is no setup "${existing}".`);
    let credentialEnc = current?.credential_enc ?? null;
    const slug = current?.slug ?? input.slug;
    const credential = credentialOf(input, errors, !current || current.credential_kind !== input.credential_kind);
    if (credential) credentialEnc = box.seal(JSON.stringify(credential), `setup:${slug}`);
    if (Object.keys(errors).length || !credentialEnc) throw new AssistantError(422, 'validation_failed', firstError(errors), { errors });
    const fields = {
      display_name: input.display_name,
      client_id: input.client_id.toLowerCase(),
      credential_kind: input.credential_kind,
      credential_enc: credentialEnc,
      redirect_uri: input.redirect_uri,
      graph_url: input.graph_url.replace(/\/+$/, ''),
      authority_host: input.authority_host.replace(/\/+$/, ''),
      scopes: input.scopes,
      time_zone: input.time_zone,
    };
    let row: SetupRow | null;
    if (current) {
      await this.repo.updateSetup(current.id, fields);
      row = await this.repo.setupById(current.id);
    } else {
      row = await this.repo.insertSetup({ slug, ...fields });
      if (!row)
        throw new AssistantError(422, 'validation_failed', `slug: a setup "${slug}" exists already`, {
          errors: { slug: ['a setup with this slug exists already'] },
        });
    }
    await this.audit.record({
      action: 'setup_save',
      result: 'ok',
      userId: actor.id,
      username: actor.username,
      setupSlug: slug,
      detail: current ? 'updated' : 'created',
    });
    return this.present(row!, await this.repo.delegates(row!.id));
  }

  async delegate(slug: string, username: string, actor: AuthUser, remove = false): Promise<void> {
    if (!actor.isAdmin) throw new AssistantError(403, 'forbidden', 'Only administrators delegate setups.');
    const setup = await this.setupOr404(slug);
    const user = await this.repo.userByName(username);
    if (!user) throw new AssistantError(422, 'validation_failed', `username: no user named "${username}"`, { errors: { username: ['no such user'] } });
    if (remove) await this.repo.undelegate(setup.id, user.id);
    else await this.repo.delegate(setup.id, user.id);
    await this.audit.record({
      action: 'delegate',
      result: 'ok',
      userId: actor.id,
      username: actor.username,
      setupSlug: slug,
      detail: `${remove ? 'removed' : 'delegated to'} ${username}`,
    });
  }

  private async setupOr404(slug: string): Promise<SetupRow> {
    const setup = await this.repo.setupBySlug(slug);
    if (!setup) throw new AssistantError(404, 'not_found', `There is no assistant setup "${slug}".`);
    return setup;
  }

  /** The setup, when the user may use it (administrators, or users it was delegated to). */
  private async usableSetup(user: AuthUser, slug: string): Promise<SetupRow> {
    const setup = await this.setupOr404(slug);
    if (!user.isAdmin && !(await this.repo.delegatedSetupIds(user.id)).includes(setup.id)) {
      throw new AssistantError(
        403,
        'setup_not_delegated',
        `The setup "${slug}" has not been delegated to you; an administrator delegates it on ${this.pageUrl}.`,
      );
    }
    return setup;
  }

  async connectionsOf(user: AuthUser): Promise<ConnectionView[]> {
    const [rows, setups] = await Promise.all([this.repo.connectionsOf(user.id), this.repo.setups()]);
    const slugs = new Map(setups.map((s) => [s.id, s.slug]));
    return rows.map((c) => ({
      setup_slug: slugs.get(c.setup_id) ?? '?',
      status: c.status,
      tenant_id: c.tenant_id,
      account: c.username,
      connected_at: c.connected_at ? new Date(c.connected_at).toISOString() : null,
      last_validation: c.last_validation,
    }));
  }

  // ---- MSAL --------------------------------------------------------------------------------------

  private credential(setup: SetupRow): Credential {
    const plain = this.requireBox().open(setup.credential_enc, `setup:${setup.slug}`);
    if (!plain)
      throw new AssistantError(
        503,
        'setup_unreadable',
        `The credential of setup "${setup.slug}" cannot be decrypted (was ASSISTANT_SECRET_KEY changed?): an administrator saves it again.`,
      );
    return JSON.parse(plain) as Credential;
  }

  /** Token cache of one user and setup in PostgreSQL, encrypted (MSAL reads it before and writes it after each access). */
  private cachePlugin(userId: number, setupId: number): ICachePlugin {
    const box = this.requireBox();
    const aad = `cache:${userId}:${setupId}`;
    return {
      beforeCacheAccess: async (ctx) => {
        const sealed = await this.repo.tokenCache(userId, setupId);
        const plain = sealed ? box.open(sealed, aad) : null;
        if (plain) ctx.tokenCache.deserialize(plain);
      },
      afterCacheAccess: async (ctx) => {
        if (ctx.cacheHasChanged) await this.repo.saveTokenCache(userId, setupId, box.seal(ctx.tokenCache.serialize(), aad));
      },
    };
  }

  private client(setup: SetupRow, cache?: { userId: number; setupId: number }): ConfidentialClientApplication {
    const credential = this.credential(setup);
    const host = setup.authority_host;
    const microsoftHost = /^https:\/\/login\.(microsoftonline\.com|microsoftonline\.us|partner\.microsoftonline\.cn)$/i.test(host);
    const log = this.deps.log;
    const config: Configuration = {
      auth: {
        clientId: setup.client_id,
        authority: `${host}/organizations`,
        ...(credential.kind === 'secret'
          ? { clientSecret: credential.secret }
          : {
              clientCertificate: {
                thumbprintSha256: new X509Certificate(credential.certificate).fingerprint256.replace(/:/g, ''),
                privateKey: credential.privateKey,
                x5c: credential.certificate,
              },
            }),
        // Another host (a sovereign cloud proxy, a test provider): trusted as named, no instance discovery.
        ...(microsoftHost ? {} : { knownAuthorities: [host] }),
      },
      ...(cache ? { cache: { cachePlugin: this.cachePlugin(cache.userId, cache.setupId) } } : {}),
      system: {
        networkClient: this.http.msalNetworkModule(),
        loggerOptions: {
          piiLoggingEnabled: false,
          logLevel: LogLevel.Warning,
          loggerCallback: (level, message, containsPii) => {
            if (!containsPii && level <= LogLevel.Warning) log.warn({ msal: message.slice(0, 300) }, 'msal');
          },
        },
      },
    };
    return new ConfidentialClientApplication(config);
  }

  // ---- connect -----------------------------------------------------------------------------------

  /** Starts the sign-in: the identity provider's authorization URL (PKCE, state bound to this browser session, account selection). */
  async beginConnect(user: AuthUser, slug: string, sessionId: string, requestId: string): Promise<string> {
    const setup = await this.usableSetup(user, slug);
    const box = this.requireBox();
    const { verifier, challenge } = await new CryptoProvider().generatePkceCodes();
    const state = randomBytes(32).toString('base64url');
    const correlationId = randomUUID();
    const url = await this.wrapIdp(() =>
      this.client(setup).getAuthCodeUrl({
        scopes: resourceScopes(setup.scopes),
        redirectUri: setup.redirect_uri,
        codeChallenge: challenge,
        codeChallengeMethod: 'S256',
        state,
        prompt: 'select_account',
        correlationId,
      }),
    );
    await this.repo.addPendingSignIn(
      sha256(state),
      {
        user_id: user.id,
        setup_id: setup.id,
        session_hash: sha256(sessionId),
        verifier_enc: box.seal(verifier, `verifier:${sha256(state)}`),
        correlation_id: correlationId,
      },
      SIGN_IN_TTL_SECONDS,
    );
    await this.audit.record({ action: 'connect_start', result: 'ok', userId: user.id, username: user.username, setupSlug: slug, correlationId, requestId });
    return url;
  }

  /** The tenant-wide admin consent URL (v2.0 `adminconsent` of the `organizations` authority) for the setup's delegated permissions. */
  async consentUrl(user: AuthUser, slug: string, sessionId: string, requestId: string): Promise<string> {
    if (!user.isAdmin) throw new AssistantError(403, 'forbidden', 'Only administrators start tenant-wide consent.');
    const setup = await this.setupOr404(slug);
    const box = this.requireBox();
    const state = randomBytes(32).toString('base64url');
    const correlationId = randomUUID();
    await this.repo.addPendingSignIn(
      sha256(state),
      {
        user_id: user.id,
        setup_id: setup.id,
        session_hash: sha256(sessionId),
        verifier_enc: box.seal('admin-consent', `verifier:${sha256(state)}`),
        correlation_id: correlationId,
      },
      SIGN_IN_TTL_SECONDS,
    );
    const graphScopes = resourceScopes(setup.scopes).map((s) => (s.includes('/') ? s : `https://graph.microsoft.com/${s}`));
    const q = new URLSearchParams({ client_id: setup.client_id, scope: graphScopes.join(' '), redirect_uri: setup.redirect_uri, state });
    await this.audit.record({
      action: 'connect_start',
      result: 'ok',
      userId: user.id,
      username: user.username,
      setupSlug: slug,
      correlationId,
      requestId,
      detail: 'admin consent',
    });
    return `${setup.authority_host}/organizations/v2.0/adminconsent?${q.toString()}`;
  }

  /**
   * The identity provider's redirect: the state must be one this browser session started (single
   * use), then the code is redeemed with the PKCE verifier, the token response validated and the
   * connection stored; a first prompt test follows (licence check).
   */
  async completeCallback(
    user: AuthUser,
    sessionId: string,
    query: Record<string, string | undefined>,
    requestId: string,
  ): Promise<{ slug: string; kind: 'connected' | 'consent'; validation: Validation | null; test: { ok: boolean; message: string } | null }> {
    const state = query.state ?? '';
    const pending = state ? await this.repo.takePendingSignIn(sha256(state)) : null;
    const base: AuditEntry = { action: 'connect', result: 'refused', userId: user.id, username: user.username, requestId };
    if (!pending) {
      await this.audit.record({ ...base, errorCode: 'state_invalid' });
      throw new AssistantError(
        422,
        'state_invalid',
        'This sign-in answer is unknown, expired or was already used. Start connect again from the assistant page.',
      );
    }
    if (pending.session_hash !== sha256(sessionId) || pending.user_id !== user.id) {
      await this.audit.record({ ...base, correlationId: pending.correlation_id, errorCode: 'state_session_mismatch' });
      throw new AssistantError(403, 'state_session_mismatch', 'This sign-in was started in another browser session; start connect again here.');
    }
    const setup = await this.repo.setupById(pending.setup_id);
    if (!setup) throw new AssistantError(404, 'not_found', 'The setup of this sign-in no longer exists.');
    const box = this.requireBox();
    const verifier = box.open(pending.verifier_enc, `verifier:${sha256(state)}`);
    const isConsent = verifier === 'admin-consent';
    const audit: AuditEntry = {
      ...base,
      setupSlug: setup.slug,
      correlationId: pending.correlation_id,
      tenantId: query.tenant ?? null,
    };
    if (query.error) {
      const code = identityProviderCode(query.error_description) ?? query.error;
      await this.audit.record({ ...audit, result: 'failed', errorCode: code, detail: isConsent ? 'admin consent' : null });
      throw new AssistantError(403, 'identity_provider_error', `The identity provider refused the ${isConsent ? 'consent' : 'sign-in'} (${code}).`, {
        identity_provider_code: code,
        action: adviceFor(identityProviderCode(code)),
      });
    }
    if (isConsent) {
      await this.audit.record({ ...audit, result: 'ok', detail: `admin consent ${query.admin_consent === 'True' ? 'granted' : 'answered'}` });
      return { slug: setup.slug, kind: 'consent', validation: null, test: null };
    }
    if (!query.code || !verifier) {
      await this.audit.record({ ...audit, errorCode: 'code_missing' });
      throw new AssistantError(422, 'code_missing', 'The identity provider sent no authorization code.');
    }
    const client = this.client(setup, { userId: user.id, setupId: setup.id });
    const result = await this.wrapIdp(
      () =>
        client.acquireTokenByCode({
          code: query.code!,
          scopes: resourceScopes(setup.scopes),
          redirectUri: setup.redirect_uri,
          codeVerifier: verifier,
          correlationId: pending.correlation_id,
        }),
      async (code) => this.audit.record({ ...audit, result: 'failed', errorCode: code }),
    );
    const validation = await this.validate(setup, result);
    await this.repo.upsertConnection({
      userId: user.id,
      setupId: setup.id,
      status: validation.ok ? 'ready' : 'invalid',
      homeAccountId: result.account?.homeAccountId ?? null,
      tenantId: validation.tenant_id,
      username: result.account?.username ?? null,
      validation,
    });
    await this.audit.record({
      ...audit,
      action: 'validation',
      result: validation.ok ? 'ok' : 'refused',
      tenantId: validation.tenant_id,
      errorCode: validation.code,
    });
    if (!validation.ok) {
      // Nothing of a refused sign-in is kept: its tokens are dropped with the cache.
      await this.dropAccount(client, result);
      await this.audit.record({ ...audit, result: 'refused', tenantId: validation.tenant_id, errorCode: validation.code });
      throw new AssistantError(
        403,
        validation.code ?? 'validation_failed',
        validation.message,
        validation.missing_scopes.length ? { missing_scopes: validation.missing_scopes } : {},
      );
    }
    await this.audit.record({ ...audit, result: 'ok', tenantId: validation.tenant_id });
    // The direct prompt test at the end of the connect flow: it finds a missing licence at once.
    let test: { ok: boolean; message: string };
    try {
      await this.respond(
        user,
        { user_prompt: 'Reply with a short greeting to confirm the connection works.' },
        { requestId, slug: setup.slug, action: 'prompt_test' },
      );
      test = { ok: true, message: 'The assistant answered the connection test.' };
    } catch (err) {
      test = { ok: false, message: err instanceof AssistantError ? err.message : 'The connection test failed.' };
    }
    return { slug: setup.slug, kind: 'connected', validation, test };
  }

  /** validateTokenResponse, then the ID token's signature and issuer against the provider's keys. */
  private async validate(setup: SetupRow, result: AuthenticationResult): Promise<Validation> {
    const v = validateTokenResponse(result, { clientId: setup.client_id, scopes: setup.scopes });
    if (!v.ok || !v.tenant_id) return v;
    let problem: string | null;
    try {
      problem = await this.idTokens.problem(result.idToken, { authorityHost: setup.authority_host, clientId: setup.client_id, tenantId: v.tenant_id });
    } catch (err) {
      if (err instanceof UpstreamUnreachable)
        throw new AssistantError(502, 'identity_provider_unreachable', `The identity provider's signing keys ${err.message}.`);
      throw new AssistantError(502, 'identity_provider_unreachable', 'The identity provider published no usable signing keys.');
    }
    return problem ? { ...v, ok: false, code: 'id_token_invalid', message: problem } : v;
  }

  private async dropAccount(client: ConfidentialClientApplication, result: AuthenticationResult) {
    if (result.account)
      await client
        .getTokenCache()
        .removeAccount(result.account)
        .catch(() => undefined);
  }

  /** Runs an identity-provider call; its errors become connector errors with the AADSTS code and what to do. */
  private async wrapIdp<T>(fn: () => Promise<T>, onError?: (code: string) => Promise<void>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof AssistantError) throw err;
      const e = err as { errorCode?: string; errorMessage?: string; message?: string; correlationId?: string };
      const unreachable = err instanceof UpstreamUnreachable || /network|endpoints_resolution|openid_config/i.test(e.errorCode ?? '');
      const code = identityProviderCode(e.errorMessage ?? e.message) ?? e.errorCode ?? 'identity_provider_error';
      await onError?.(code);
      if (unreachable) throw new AssistantError(502, 'identity_provider_unreachable', 'The identity provider could not be reached or gave no usable answer.');
      throw new AssistantError(403, 'identity_provider_error', `The identity provider refused the request (${code}).`, {
        identity_provider_code: code,
        action: adviceFor(identityProviderCode(code)),
      });
    }
  }

  // ---- respond -----------------------------------------------------------------------------------

  async respond(
    user: AuthUser,
    fields: PromptFields & { connector_slug?: string | undefined; ignored?: string[] },
    ctx: { requestId: string; slug?: string; action?: 'request' | 'prompt_test' },
  ): Promise<RespondResult> {
    const started = performance.now();
    const action = ctx.action ?? 'request';
    const audit: AuditEntry = { action, result: 'ok', userId: user.id, username: user.username, requestId: ctx.requestId };
    const slug = ctx.slug ?? fields.connector_slug;
    if (fields.connector_slug && !ctx.slug && !user.isAdmin) {
      await this.audit.record({ ...audit, result: 'refused', errorCode: 'connector_slug_admin_only' });
      throw new AssistantError(403, 'connector_slug_admin_only', '`connector_slug` is an administrator-only override.');
    }
    await this.rateLimit(user.id);
    let setup: SetupRow | null;
    let connection: ConnectionRow | null;
    if (slug) {
      setup = await this.repo.setupBySlug(slug);
      if (!setup) {
        await this.audit.record({ ...audit, result: 'refused', errorCode: 'unknown_connector' });
        throw new AssistantError(422, 'unknown_connector', `connector_slug: there is no assistant setup "${slug}".`, {
          errors: { connector_slug: ['unknown setup'] },
        });
      }
      connection = await this.repo.connection(user.id, setup.id);
    } else {
      connection = await this.repo.latestConnection(user.id);
      setup = connection ? await this.repo.setupById(connection.setup_id) : null;
    }
    audit.setupSlug = setup?.slug ?? null;
    const reconnect = { reconnect_url: this.pageUrl };
    if (!setup || !connection || !connection.home_account_id || !connection.token_cache_enc) {
      await this.audit.record({ ...audit, result: 'refused', errorCode: 'not_connected' });
      throw new AssistantError(
        409,
        'not_connected',
        `No assistant account is connected for you${setup ? ` on setup "${setup.slug}"` : ''}: connect one on ${this.pageUrl}.`,
        reconnect,
      );
    }
    audit.tenantId = connection.tenant_id;
    if (!user.isAdmin && !(await this.repo.delegatedSetupIds(user.id)).includes(setup.id)) {
      await this.audit.record({ ...audit, result: 'refused', errorCode: 'setup_not_delegated' });
      throw new AssistantError(403, 'setup_not_delegated', `The setup "${setup.slug}" is no longer delegated to you.`);
    }
    if (connection.status === 'reconnect_required') {
      await this.audit.record({ ...audit, result: 'reconnect_required', errorCode: 'reconnect_required' });
      throw new AssistantError(409, 'reconnect_required', `The assistant account must be reconnected: ${this.pageUrl}.`, reconnect);
    }
    if (connection.status === 'invalid') {
      const v = connection.last_validation;
      await this.audit.record({ ...audit, result: 'refused', errorCode: v?.code ?? 'validation_failed' });
      throw new AssistantError(403, v?.code ?? 'validation_failed', v?.message ?? 'The connection did not pass validation; connect again.', {
        ...reconnect,
        ...(v?.missing_scopes.length ? { missing_scopes: v.missing_scopes } : {}),
      });
    }

    // A token through MSAL's cache (refreshed by MSAL when due), validated before the upstream call.
    const client = this.client(setup, { userId: user.id, setupId: setup.id });
    const account = await client.getTokenCache().getAccountByHomeId(connection.home_account_id);
    if (!account) {
      await this.markReconnect(user, setup, connection, 'token_cache_empty', 'The stored sign-in is gone; connect again.');
      await this.audit.record({ ...audit, result: 'reconnect_required', errorCode: 'token_cache_empty' });
      throw new AssistantError(409, 'reconnect_required', `The assistant account must be reconnected: ${this.pageUrl}.`, reconnect);
    }
    const correlationId = randomUUID();
    let token: AuthenticationResult;
    try {
      token = await client.acquireTokenSilent({ account, scopes: resourceScopes(setup.scopes), correlationId });
    } catch (err) {
      const e = err as { errorCode?: string; errorMessage?: string; message?: string };
      const code = identityProviderCode(e.errorMessage ?? e.message) ?? e.errorCode ?? 'refresh_failed';
      const interaction =
        err instanceof InteractionRequiredAuthError ||
        /invalid_grant|no_tokens_found|interaction_required|login_required|consent_required|refresh_token_expired|bad_token/i.test(e.errorCode ?? '');
      await this.audit.record({ ...audit, action: 'refresh', result: interaction ? 'reconnect_required' : 'failed', correlationId, errorCode: code });
      if (interaction) {
        await this.markReconnect(user, setup, connection, code, `The sign-in can no longer be refreshed (${code}); connect again.`);
        await this.audit.record({ ...audit, result: 'reconnect_required', correlationId, errorCode: code });
        throw new AssistantError(409, 'reconnect_required', `The assistant account must be reconnected (${code}): ${this.pageUrl}.`, {
          ...reconnect,
          identity_provider_code: code,
          action: adviceFor(identityProviderCode(code)),
        });
      }
      await this.audit.record({ ...audit, result: 'upstream_error', correlationId, errorCode: code });
      throw new AssistantError(
        502,
        'identity_provider_unreachable',
        'The identity provider could not refresh the sign-in (unreachable or an unusable answer).',
      );
    }
    if (!token.fromCache) await this.audit.record({ ...audit, action: 'refresh', result: 'ok', correlationId });
    const validation = await this.validate(setup, token);
    if (!validation.ok) {
      await this.repo.setStatus(user.id, setup.id, 'invalid', validation);
      await this.audit.record({ ...audit, action: 'validation', result: 'refused', correlationId, errorCode: validation.code });
      await this.audit.record({ ...audit, result: 'refused', correlationId, errorCode: validation.code });
      throw new AssistantError(
        403,
        validation.code ?? 'validation_failed',
        validation.message,
        validation.missing_scopes.length ? { missing_scopes: validation.missing_scopes, ...reconnect } : reconnect,
      );
    }
    await this.audit.record({ ...audit, action: 'validation', result: 'ok', correlationId });

    const chat = composeChat(fields, setup.time_zone);
    try {
      const reply = await this.graph.chat(setup.graph_url, token.accessToken, chat);
      if (connection.status !== 'ready') await this.repo.setStatus(user.id, setup.id, 'ready', validation);
      await this.audit.record({ ...audit, result: 'ok', correlationId: reply.requestId ?? correlationId });
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
      await this.audit.record({
        ...audit,
        result: err.code === 'licence_missing' ? 'licence_missing' : 'upstream_error',
        correlationId: err.requestId ?? correlationId,
        errorCode: err.code,
      });
      if (err.code === 'licence_missing') {
        await this.repo.setStatus(user.id, setup.id, 'licence_missing', { ...validation, ok: false, code: 'licence_missing', message: err.message });
        throw new AssistantError(
          403,
          'licence_missing',
          `${err.message} An administrator assigns an assistant licence to the account, then the request can be repeated.`,
        );
      }
      if (err.code === 'upstream_forbidden') throw new AssistantError(403, 'permission_missing', err.message, reconnect);
      if (err.code === 'upstream_unauthorized') {
        await this.markReconnect(user, setup, connection, err.code, err.message);
        throw new AssistantError(409, 'reconnect_required', `${err.message} Reconnect the account: ${this.pageUrl}.`, reconnect);
      }
      throw new AssistantError(502, err.code, err.message);
    }
  }

  private async markReconnect(user: AuthUser, setup: SetupRow, connection: ConnectionRow, code: string, message: string) {
    await this.repo.setStatus(user.id, setup.id, 'reconnect_required', {
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

// ---- setup validation ----------------------------------------------------------------------------

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function validateSetup(s: SetupInput): Record<string, string[]> {
  const errors: Record<string, string[]> = {};
  const add = (f: string, m: string) => (errors[f] ??= []).push(m);
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(s.slug)) add('slug', 'lower-case letters, digits and hyphens (at most 63)');
  if (!GUID.test(s.client_id)) add('client_id', 'the application (client) id is a GUID');
  const https = (f: string, v: string, path: boolean) => {
    try {
      const u = new URL(v);
      if (u.protocol !== 'https:' && !(f === 'graph_url' && u.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname)))
        add(f, 'must be an https:// URL');
      if (!path && u.pathname.replace(/\/+$/, '') !== '') add(f, 'must be an origin without a path (the tenant path is added)');
      if (u.search || u.hash || u.username) add(f, 'must have no query, fragment or credentials');
    } catch {
      add(f, 'must be a URL');
    }
  };
  https('graph_url', s.graph_url, true);
  https('authority_host', s.authority_host, false);
  try {
    const u = new URL(s.redirect_uri);
    if (u.protocol !== 'https:' && !['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname)) add('redirect_uri', 'must be https (http only on localhost)');
  } catch {
    add('redirect_uri', 'must be a URL');
  }
  if (!s.scopes.length) add('scopes', 'at least one scope');
  for (const scope of s.scopes) if (!/^[A-Za-z0-9_.:/-]{1,200}$/.test(scope)) add('scopes', `"${scope.slice(0, 40)}" is not a scope name`);
  try {
    new Intl.DateTimeFormat('en', { timeZone: s.time_zone });
  } catch {
    add('time_zone', 'an IANA time zone such as Europe/Stockholm');
  }
  return errors;
}

function credentialOf(s: SetupInput, errors: Record<string, string[]>, required: boolean): Credential | null {
  if (s.credential_kind === 'secret') {
    if (s.client_secret) return { kind: 'secret', secret: s.client_secret };
    if (required) (errors.client_secret ??= []).push('the client secret is required');
    return null;
  }
  if (!s.certificate_pem && !s.private_key_pem) {
    if (required) (errors.certificate_pem ??= []).push('the certificate and its private key are required');
    return null;
  }
  try {
    new X509Certificate(s.certificate_pem ?? '');
  } catch {
    (errors.certificate_pem ??= []).push('not a PEM certificate');
  }
  if (!/-----BEGIN (RSA |EC )?PRIVATE KEY-----/.test(s.private_key_pem ?? '')) (errors.private_key_pem ??= []).push('not a PEM private key');
  return { kind: 'certificate', certificate: s.certificate_pem ?? '', privateKey: s.private_key_pem ?? '' };
}

function firstError(errors: Record<string, string[]>): string {
  const [field, messages] = Object.entries(errors)[0] ?? ['request', ['is invalid']];
  return `${field}: ${messages[0]}`;
}
