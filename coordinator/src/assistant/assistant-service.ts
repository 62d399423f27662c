import { createHash, randomBytes, randomUUID, X509Certificate } from 'node:crypto';
import type { AuthenticationResult, ConfidentialClientApplication, Configuration, ICachePlugin } from '@azure/msal-node';
import type { Redis } from 'ioredis';
import type { FastifyBaseLogger } from 'fastify';
import type { AuthUser } from '../accounts/types.js';
import type { Config } from '../config.js';
import type { Orm } from '../db/orm.js';
import { AssistantAuditLog, type AuditEntry } from './audit-log.js';
import { GraphAssistant } from './graph-assistant.js';
import { AssistantRepository, type ConnectionRow, type SetupRow, type Validation } from './repository.js';
import { SecretBox } from './secret-box.js';
import { UpstreamHttp, UpstreamUnreachable } from './upstream-http.js';
import { IdTokenVerifier } from './id-token.js';
import { adviceFor, identityProviderCode, resourceScopes, validateTokenResponse } from './validation.js';
import { AssistantError } from './errors.js';
import { loadMsal } from './msal.js';
import { Responder, type RespondContext, type RespondFields, type RespondResult } from './respond.js';

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
  private responder: Responder | undefined;

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

  private async client(setup: SetupRow, cache?: { userId: number; setupId: number }): Promise<ConfidentialClientApplication> {
    const { ConfidentialClientApplication, LogLevel } = await loadMsal();
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
    const { verifier, challenge } = await new (await loadMsal()).CryptoProvider().generatePkceCodes();
    const state = randomBytes(32).toString('base64url');
    const correlationId = randomUUID();
    const url = await this.wrapIdp(async () =>
      (await this.client(setup)).getAuthCodeUrl({
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
    const client = await this.client(setup, { userId: user.id, setupId: setup.id });
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
    const validation = await this.storeConnection(user, setup, client, result, audit);
    await this.audit.record({ ...audit, result: 'ok', tenantId: validation.tenant_id });
    return { slug: setup.slug, kind: 'connected', validation, test: await this.connectionTest(user, setup.slug, requestId) };
  }

  /**
   * The validated sign-in stored as the user's connection (ready, or invalid); a refused one keeps
   * nothing of its tokens and throws.
   */
  private async storeConnection(
    user: AuthUser,
    setup: SetupRow,
    client: ConfidentialClientApplication,
    result: AuthenticationResult,
    audit: AuditEntry,
  ): Promise<Validation> {
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
    return validation;
  }

  /** The direct prompt test at the end of the connect flow: it finds a missing licence at once. */
  private async connectionTest(user: AuthUser, slug: string, requestId: string): Promise<{ ok: boolean; message: string }> {
    try {
      await this.respond(user, { user_prompt: 'Reply with a short greeting to confirm the connection works.' }, { requestId, slug, action: 'prompt_test' });
      return { ok: true, message: 'The assistant answered the connection test.' };
    } catch (err) {
      return { ok: false, message: err instanceof AssistantError ? err.message : 'The connection test failed.' };
    }
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

  // ---- respond (respond.ts) ---------------------------------------------------------------------

  /** A prompt answered through the user's connected account (respond.ts). */
  async respond(user: AuthUser, fields: RespondFields, ctx: RespondContext): Promise<RespondResult> {
    this.responder ??= new Responder({
      audit: this.audit,
      repo: this.repo,
      graph: this.graph,
      redis: this.deps.redis,
      config: this.deps.config,
      pageUrl: this.pageUrl,
      client: (setup, cache) => this.client(setup, cache),
      validate: (setup, result) => this.validate(setup, result),
    });
    return this.responder.respond(user, fields, ctx);
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
