import { execFileSync } from 'node:child_process';
import { createHash, randomBytes, randomUUID, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeProtectedHeader, exportJWK, generateKeyPair, importX509, jwtVerify, SignJWT, type JWTPayload, type KeyObject } from 'jose';
import { listenOnLoopback } from './stub-server.js';

/**
 * A local stand-in for the Microsoft identity platform (v2.0 endpoints), built from its public
 * protocol documentation: HTTPS with a certificate made for the test (its PEM is the CA the
 * coordinator trusts through ASSISTANT_EXTRA_CA_FILE), the tenant-path endpoints MSAL uses
 * (`/{tenant}/v2.0/.well-known/openid-configuration`, `/{tenant}/oauth2/v2.0/authorize`, `…/token`,
 * `/{tenant}/discovery/v2.0/keys`, `/{tenant}/v2.0/adminconsent`), an account picker page, PKCE,
 * RS256 ID and access tokens with `tid`, `oid`, `preferred_username`, `aud`, `scp`, refresh
 * tokens, `client_info`, and errors with AADSTS codes.
 */
export interface StandInAccount {
  username: string;
  name: string;
  password: string;
  oid: string;
  tid: string;
  /** Scopes this account's tenant consented to (default: every requested scope). */
  grantedScopes?: string[];
  /** `aud` of the ID token (default: the requesting application). */
  idTokenAudience?: string;
  /** Access-token lifetime (seconds); under MSAL's 5-minute refresh offset every silent call refreshes. */
  accessTokenSeconds?: number;
  /** The ID token is signed with a key the provider does not publish (a forgery). */
  forgedIdToken?: boolean;
  /** The sign-in fails with this AADSTS error (sent back to the redirect URI). */
  failWith?: { error: string; code: number; description: string };
}

export interface StandInApp {
  clientId: string;
  /** A client secret, or… */
  clientSecret?: string;
  /** …a certificate (PEM): the client authenticates with a JWT assertion signed by its key (private_key_jwt). */
  certificatePem?: string;
  redirectUris: string[];
}

interface Grant {
  account: StandInAccount;
  clientId: string;
  scopes: string[];
}

export const GRAPH_AUDIENCE = 'https://graph.microsoft.com';
const OIDC = new Set(['openid', 'profile', 'offline_access', 'email']);

export class MsIdentityStandIn {
  readonly accounts: StandInAccount[] = [];
  readonly apps: StandInApp[] = [];
  /** Every authorize request (its query), for assertions on prompt, PKCE and state. */
  readonly authorizeRequests: URLSearchParams[] = [];
  readonly tokenRequests: URLSearchParams[] = [];
  /** Every secret this provider handed out or received (codes, tokens, states, verifiers): none may be stored or logged by the coordinator. */
  readonly secretsSeen = new Set<string>();
  private readonly codes = new Map<string, Grant & { redirectUri: string; challenge: string }>();
  private readonly refreshTokens = new Map<string, Grant & { expired: boolean }>();
  private server!: Server;
  private closeServer: () => Promise<void> = async () => {};
  private dir = '';
  private keys!: { privateKey: KeyObject; publicKey: KeyObject };
  private forger!: { privateKey: KeyObject; publicKey: KeyObject };
  private readonly kid = randomUUID();
  port = 0;
  caFile = '';

  get url() {
    return `https://localhost:${this.port}`;
  }

  get ca() {
    return readFileSync(this.caFile, 'utf8');
  }

  async start(): Promise<this> {
    this.dir = mkdtempSync(path.join(tmpdir(), 'sonar-ms-identity-'));
    const key = path.join(this.dir, 'key.pem');
    this.caFile = path.join(this.dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        key,
        '-out',
        this.caFile,
        '-days',
        '2',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
        '-addext',
        'basicConstraints=critical,CA:TRUE',
      ],
      { stdio: 'ignore' },
    );
    this.keys = await generateKeyPair('RS256', { extractable: true });
    this.forger = await generateKeyPair('RS256', { extractable: true });
    this.server = createServer({ key: readFileSync(key), cert: readFileSync(this.caFile) }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.handle(req, res, Buffer.concat(chunks).toString('utf8')).catch((err: unknown) => {
          res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
        });
      });
    });
    const listening = await listenOnLoopback(this.server);
    this.port = listening.port;
    this.closeServer = listening.close;
    return this;
  }

  async stop() {
    await this.closeServer();
    rmSync(this.dir, { recursive: true, force: true });
  }

  addApp(app: StandInApp) {
    this.apps.push(app);
    if (app.clientSecret) this.secretsSeen.add(app.clientSecret);
    return app;
  }

  addAccount(a: Omit<StandInAccount, 'oid' | 'password'> & { oid?: string; password?: string }): StandInAccount {
    const account = { oid: randomUUID(), password: `pw-${randomBytes(6).toString('hex')}`, ...a };
    this.accounts.push(account);
    return account;
  }

  /** Every refresh token of the account stops working (expired after inactivity: AADSTS700082). */
  expireRefreshTokens(username: string) {
    for (const rt of this.refreshTokens.values()) if (rt.account.username === username) rt.expired = true;
  }

  /** Verifies an access token this provider issued (the graph stand-in calls this): its claims, or null. */
  async verifyAccessToken(token: string): Promise<JWTPayload | null> {
    try {
      return (await jwtVerify(token, this.keys.publicKey, { audience: GRAPH_AUDIENCE })).payload;
    } catch {
      return null;
    }
  }

  private async handle(req: IncomingMessage, res: ServerResponse, body: string) {
    const url = new URL(req.url ?? '/', this.url);
    const m = /^\/([^/]+)\/(.+)$/.exec(url.pathname);
    const tenant = m?.[1] ?? '';
    const rest = m?.[2] ?? '';
    if (req.method === 'GET' && rest === 'v2.0/.well-known/openid-configuration') {
      this.json(res, 200, this.metadata(tenant));
      return;
    }
    if (req.method === 'GET' && rest === 'discovery/v2.0/keys') {
      this.json(res, 200, { keys: [{ ...(await exportJWK(this.keys.publicKey)), kid: this.kid, use: 'sig', alg: 'RS256' }] });
      return;
    }
    if (req.method === 'GET' && rest === 'oauth2/v2.0/authorize') {
      this.authorize(res, url.searchParams);
      return;
    }
    if (req.method === 'POST' && rest === 'oauth2/v2.0/select') {
      this.select(res, new URLSearchParams(body));
      return;
    }
    if (req.method === 'POST' && rest === 'oauth2/v2.0/token') return this.token(res, new URLSearchParams(body), url.pathname);
    if (req.method === 'GET' && rest === 'v2.0/adminconsent') {
      this.adminConsent(res, url.searchParams);
      return;
    }
    {
      this.json(res, 404, { error: 'not_found', error_description: `AADSTS90002: no endpoint ${url.pathname}` });
      return;
    }
  }

  private metadata(tenant: string) {
    const base = `${this.url}/${tenant}`;
    return {
      token_endpoint: `${base}/oauth2/v2.0/token`,
      token_endpoint_auth_methods_supported: ['client_secret_post', 'private_key_jwt', 'client_secret_basic'],
      jwks_uri: `${base}/discovery/v2.0/keys`,
      response_modes_supported: ['query', 'fragment', 'form_post'],
      subject_types_supported: ['pairwise'],
      id_token_signing_alg_values_supported: ['RS256'],
      response_types_supported: ['code', 'id_token', 'code id_token', 'id_token token'],
      scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
      issuer: `${this.url}/{tenantid}/v2.0`,
      request_uri_parameter_supported: false,
      userinfo_endpoint: `${this.url}/oidc/userinfo`,
      authorization_endpoint: `${base}/oauth2/v2.0/authorize`,
      device_authorization_endpoint: `${base}/oauth2/v2.0/devicecode`,
      http_logout_supported: true,
      frontchannel_logout_supported: true,
      end_session_endpoint: `${base}/oauth2/v2.0/logout`,
      claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'nonce', 'preferred_username', 'name', 'tid', 'ver', 'oid'],
      tenant_region_scope: null,
      cloud_instance_name: 'localhost',
      cloud_graph_host_name: 'localhost',
      msgraph_host: 'localhost',
      rbac_url: 'https://localhost',
    };
  }

  private errorPage(res: ServerResponse, code: string, text: string) {
    res
      .writeHead(400, { 'content-type': 'text/html; charset=utf-8' })
      .end(`<!doctype html><title>Sign in</title><h1>Sorry, we couldn't sign you in</h1><p id="error">${code}: ${esc(text)}</p>`);
  }

  private authorize(res: ServerResponse, q: URLSearchParams) {
    this.authorizeRequests.push(q);
    const state = q.get('state');
    if (state) this.secretsSeen.add(state);
    const app = this.apps.find((a) => a.clientId === q.get('client_id'));
    if (!app) {
      this.errorPage(res, 'AADSTS700016', `Application with identifier '${q.get('client_id')}' was not found in the directory.`);
      return;
    }
    if (!app.redirectUris.includes(q.get('redirect_uri') ?? '')) {
      this.errorPage(res, 'AADSTS50011', 'The redirect URI specified in the request does not match.');
      return;
    }
    if (q.get('response_type') !== 'code' || q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge')) {
      {
        this.errorPage(res, 'AADSTS900144', 'The request must use the authorization code flow with PKCE (S256).');
        return;
      }
    }
    const hidden = [...q].map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`).join('');
    const accounts = this.accounts
      .map(
        (a) => `<li><form method="post" action="select">${hidden}<input type="hidden" name="login" value="${esc(a.username)}">
          <span class="account">${esc(a.name)} &lt;${esc(a.username)}&gt;</span>
          <label>Password <input type="password" name="passwd" aria-label="Password for ${esc(a.username)}"></label>
          <button type="submit" data-account="${esc(a.username)}">Sign in as ${esc(a.username)}</button></form></li>`,
      )
      .join('');
    res
      .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      .end(`<!doctype html><title>Pick an account</title><h1>Pick an account</h1><p>prompt=${esc(q.get('prompt') ?? '')}</p><ul>${accounts}</ul>`);
  }

  private select(res: ServerResponse, f: URLSearchParams) {
    const account = this.accounts.find((a) => a.username === f.get('login'));
    if (!account || account.password !== f.get('passwd')) {
      this.errorPage(res, 'AADSTS50126', 'Error validating credentials due to invalid username or password.');
      return;
    }
    const redirect = new URL(f.get('redirect_uri') ?? '');
    const state = f.get('state');
    if (account.failWith) {
      redirect.searchParams.set('error', account.failWith.error);
      redirect.searchParams.set(
        'error_description',
        `AADSTS${account.failWith.code}: ${account.failWith.description}\r\nTrace ID: ${randomUUID()}\r\nCorrelation ID: ${randomUUID()}`,
      );
    } else {
      const code = `code-${randomBytes(24).toString('base64url')}`;
      this.secretsSeen.add(code);
      this.codes.set(code, {
        account,
        clientId: f.get('client_id') ?? '',
        scopes: (f.get('scope') ?? '').split(' ').filter(Boolean),
        redirectUri: f.get('redirect_uri') ?? '',
        challenge: f.get('code_challenge') ?? '',
      });
      redirect.searchParams.set('code', code);
      redirect.searchParams.set('client_info', clientInfo(account));
      redirect.searchParams.set('session_state', randomUUID());
    }
    if (state) redirect.searchParams.set('state', state);
    res.writeHead(302, { location: redirect.toString() }).end();
  }

  private adminConsent(res: ServerResponse, q: URLSearchParams) {
    const redirect = new URL(q.get('redirect_uri') ?? '');
    const state = q.get('state');
    if (state) this.secretsSeen.add(state);
    redirect.searchParams.set('admin_consent', 'True');
    redirect.searchParams.set('tenant', this.accounts[0]?.tid ?? randomUUID());
    redirect.searchParams.set('scope', q.get('scope') ?? '');
    if (state) redirect.searchParams.set('state', state);
    res.writeHead(302, { location: redirect.toString() }).end();
  }

  private oauthError(res: ServerResponse, status: number, error: string, code: number, description: string, suberror?: string) {
    {
      this.json(res, status, {
        error,
        error_description: `AADSTS${code}: ${description} Trace ID: ${randomUUID()} Correlation ID: ${randomUUID()} Timestamp: ${new Date().toISOString()}`,
        error_codes: [code],
        timestamp: new Date().toISOString(),
        trace_id: randomUUID(),
        correlation_id: randomUUID(),
        ...(suberror ? { suberror } : {}),
      });
      return;
    }
  }

  /** client_secret, or a client assertion signed with the app's certificate key (iss = sub = client id, aud = the token endpoint). */
  private async clientAuthenticated(app: StandInApp, f: URLSearchParams, endpoint: string): Promise<boolean> {
    if (app.clientSecret) return f.get('client_secret') === app.clientSecret;
    const assertion = f.get('client_assertion');
    if (!app.certificatePem || !assertion || f.get('client_assertion_type') !== 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer') return false;
    try {
      // MSAL signs with PS256 when given a SHA-256 thumbprint (RS256 with a SHA-1 one); the provider takes both.
      const alg = decodeProtectedHeader(assertion).alg;
      if (alg !== 'PS256' && alg !== 'RS256') return false;
      const key = await importX509(app.certificatePem, alg);
      const { payload, protectedHeader } = await jwtVerify(assertion, key, {
        audience: endpoint,
        issuer: app.clientId,
        subject: app.clientId,
        // Clock skew, as the real service allows (MSAL rounds its iat/nbf to the nearest second).
        clockTolerance: 300,
      });
      const thumbprint = createHash('sha256').update(new X509Certificate(app.certificatePem).raw).digest('base64url');
      return Boolean(payload.jti) && protectedHeader['x5t#S256'] === thumbprint;
    } catch {
      return false;
    }
  }

  private async token(res: ServerResponse, f: URLSearchParams, path: string) {
    this.tokenRequests.push(f);
    for (const k of ['code', 'refresh_token', 'code_verifier', 'client_secret']) {
      const v = f.get(k);
      if (v) this.secretsSeen.add(v);
    }
    const app = this.apps.find((a) => a.clientId === f.get('client_id'));
    if (!app) {
      this.oauthError(res, 400, 'unauthorized_client', 700016, 'Application was not found in the directory.');
      return;
    }
    if (!(await this.clientAuthenticated(app, f, `${this.url}${path}`))) {
      if (app.certificatePem) this.oauthError(res, 401, 'invalid_client', 700027, 'Client assertion failed signature validation.');
      else this.oauthError(res, 401, 'invalid_client', 7000215, 'Invalid client secret provided.');
      return;
    }
    let grant: Grant;
    if (f.get('grant_type') === 'authorization_code') {
      const code = this.codes.get(f.get('code') ?? '');
      this.codes.delete(f.get('code') ?? '');
      if (!code || code.clientId !== app.clientId) {
        this.oauthError(res, 400, 'invalid_grant', 70008, 'The provided authorization code or refresh token has expired or was already redeemed.');
        return;
      }
      if (code.redirectUri !== f.get('redirect_uri')) {
        this.oauthError(res, 400, 'invalid_grant', 50148, 'The redirect URI does not match the one of the authorization request.');
        return;
      }
      const verifier = f.get('code_verifier') ?? '';
      if (createHash('sha256').update(verifier).digest('base64url') !== code.challenge) {
        {
          this.oauthError(res, 400, 'invalid_grant', 501481, 'The Code_Verifier does not match the code_challenge supplied in the authorization request.');
          return;
        }
      }
      grant = code;
    } else if (f.get('grant_type') === 'refresh_token') {
      const rt = this.refreshTokens.get(f.get('refresh_token') ?? '');
      if (!rt || rt.clientId !== app.clientId) {
        this.oauthError(res, 400, 'invalid_grant', 9002313, 'Invalid request. Request is malformed or invalid.');
        return;
      }
      if (rt.expired) {
        {
          this.oauthError(res, 400, 'invalid_grant', 700082, 'The refresh token has expired due to inactivity.', 'bad_token');
          return;
        }
      }
      grant = { ...rt, scopes: (f.get('scope') ?? '').split(' ').filter(Boolean) };
    } else {
      {
        this.oauthError(res, 400, 'unsupported_grant_type', 70003, 'The app requested an unsupported grant type.');
        return;
      }
    }
    const { account } = grant;
    const requested = grant.scopes.filter((s) => !OIDC.has(s));
    const granted = account.grantedScopes ? requested.filter((s) => account.grantedScopes!.includes(s)) : requested;
    const lifetime = account.accessTokenSeconds ?? 3600;
    const now = Math.floor(Date.now() / 1000);
    const sign = (claims: JWTPayload, seconds: number, key = this.keys.privateKey) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: this.kid, typ: 'JWT' })
        .setIssuedAt(now)
        .setNotBefore(now)
        .setExpirationTime(now + seconds)
        .sign(key);
    const accessToken = await sign(
      {
        aud: GRAPH_AUDIENCE,
        iss: `${this.url}/${account.tid}/v2.0`,
        tid: account.tid,
        oid: account.oid,
        upn: account.username,
        appid: app.clientId,
        scp: granted.join(' '),
        ver: '1.0',
      },
      lifetime,
    );
    const idToken = await sign(
      {
        aud: account.idTokenAudience ?? app.clientId,
        iss: `${this.url}/${account.tid}/v2.0`,
        sub: createHash('sha256').update(`${account.oid}:${app.clientId}`).digest('base64url'),
        tid: account.tid,
        oid: account.oid,
        preferred_username: account.username,
        name: account.name,
        ver: '2.0',
      },
      3600,
      account.forgedIdToken ? this.forger.privateKey : this.keys.privateKey,
    );
    const refreshToken = `rt-${randomBytes(32).toString('base64url')}`;
    this.refreshTokens.set(refreshToken, { account, clientId: app.clientId, scopes: grant.scopes, expired: false });
    for (const v of [accessToken, idToken, refreshToken]) this.secretsSeen.add(v);
    {
      this.json(res, 200, {
        token_type: 'Bearer',
        scope: [...granted, ...grant.scopes.filter((s) => OIDC.has(s))].join(' '),
        expires_in: lifetime,
        ext_expires_in: lifetime,
        access_token: accessToken,
        refresh_token: refreshToken,
        id_token: idToken,
        client_info: clientInfo(account),
      });
      return;
    }
  }

  private json(res: ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' }).end(JSON.stringify(body));
  }
}

const clientInfo = (a: StandInAccount) => Buffer.from(JSON.stringify({ uid: a.oid, utid: a.tid })).toString('base64url');
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
