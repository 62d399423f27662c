import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import type { UpstreamHttp } from './upstream-http.js';

const JWKS_TTL_MS = 60 * 60_000;

/**
 * Signature and issuer check of ID tokens against the identity provider's published keys
 * (`{authority}/organizations/discovery/v2.0/keys`, kept an hour; fetched again when a token names
 * an unknown key, as after a key rollover). Claims (tenant, audience, scopes) are checked by
 * validateTokenResponse.
 */
export class IdTokenVerifier {
  private readonly keys = new Map<string, { at: number; set: ReturnType<typeof createLocalJWKSet> }>();

  constructor(private readonly http: UpstreamHttp) {}

  /** null when the token is genuine; otherwise why not. */
  async problem(idToken: string, o: { authorityHost: string; clientId: string; tenantId: string }): Promise<string | null> {
    const expectedIssuer = `${o.authorityHost}/${o.tenantId}/v2.0`;
    for (const fresh of [false, true]) {
      const set = await this.keySet(o.authorityHost, fresh);
      try {
        await jwtVerify(idToken, set, { audience: o.clientId, issuer: expectedIssuer, algorithms: ['RS256'], clockTolerance: 300 });
        return null;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'ERR_JWKS_NO_MATCHING_KEY' && !fresh) continue;
        if (code === 'ERR_JWT_CLAIM_VALIDATION_FAILED') return `The ID token's ${(err as { claim?: string }).claim ?? 'claims'} is not the expected value.`;
        if (code === 'ERR_JWT_EXPIRED') return 'The ID token has expired.';
        return 'The ID token signature does not verify with the identity provider’s published keys.';
      }
    }
    return 'The ID token is signed with a key the identity provider does not publish.';
  }

  private async keySet(host: string, refresh: boolean) {
    const cached = this.keys.get(host);
    if (cached && !refresh && Date.now() - cached.at < JWKS_TTL_MS) return cached.set;
    const res = await this.http.send(`${host}/organizations/discovery/v2.0/keys`, { method: 'GET' });
    let jwks: JSONWebKeySet;
    try {
      jwks = JSON.parse(res.text) as JSONWebKeySet;
    } catch {
      jwks = { keys: [] };
    }
    if (res.status !== 200 || !Array.isArray(jwks.keys)) throw new Error(`the identity provider's key set answered ${res.status}`);
    const set = createLocalJWKSet(jwks);
    this.keys.set(host, { at: Date.now(), set });
    return set;
  }
}
