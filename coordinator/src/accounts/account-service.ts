import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { isPermission, isTokenScope, type Permission, type TokenScope } from '@sonar/shared';
import type { Orm } from '../db/orm.js';
import { dbOf } from '../db/sql.js';
import { AppError } from '../http/errors.js';
import { IpRangeSet } from '../http/ip-ranges.js';
import { canonicalCidr } from '../http/cidr.js';
import { AccountRepository, type DnsKeyAuthRow } from './account-repository.js';
import { CredentialCache, credentialChanges } from './credential-cache.js';
import { DnsApiKey, DnsIpWhitelistEntry, DnsZonePermission, PersonalAccessToken, User } from './entities.js';
import { dummyPasswordHash, generatePassword, hashPassword, verifyPassword } from './password.js';
import { DNS_KEY_PREFIX, PERSONAL_TOKEN_PREFIX, newSecret, sha256Hex } from './secrets.js';
import { hasPermission, type AuthUser } from './types.js';

const USERNAME_RE = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$/;
const ZONE_RE = /^(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

export function toAuthUser(user: User): AuthUser {
  return {
    id: user.id,
    username: user.username,
    email: user.email,
    isAdmin: user.isAdmin,
    permissions: [...user.permissions],
  };
}

export function normalizeZone(zone: string): string {
  const z = zone.trim().toLowerCase().replace(/\.$/, '');
  if (!ZONE_RE.test(z)) throw invalid('zone', `"${zone}" is not a valid zone name`);
  return z;
}

function expiryFrom(days: number | undefined): Date | null {
  if (days === undefined) return null;
  if (!Number.isInteger(days) || days < 1 || days > 3650) throw invalid('expires_in_days', 'must be a whole number of days from 1 to 3650');
  return new Date(Date.now() + days * 86400_000);
}

function checkLabel(field: string, value: string, max: number): string {
  const v = value.trim();
  if (!v || v.length > max) throw invalid(field, `must be 1-${max} characters`);
  return v;
}

/** Name of the token the built-in generator issues for the speech token API (`/api/speech/transcribe*`). */
export const SPEECH_API_TOKEN_NAME = 'provider_speech_api';
/** What the owner of a speech token API token needs (the token API's own requirement). */
export const SPEECH_API_PERMISSIONS: readonly Permission[] = ['speech.api', 'speech.use'];

function invalid(field: string, message: string) {
  return new AppError('validation_failed', message, { errors: { [field]: [message] } });
}

/** What authentication needs of a user row (cached by id; null: no such user). */
interface UserAuthState {
  user: AuthUser;
  tokenVersion: number;
  disabled: boolean;
}

export interface AccountServiceOptions {
  /**
   * How long a user looked up by id (JWT and session checks) or a DNS API key is reused
   * (AUTH_CACHE_SECONDS × 1000; absent or 0: every check reads PostgreSQL). Changes made through
   * any AccountService of this process apply at once (see credential-cache.ts).
   */
  credentialCacheMs?: number;
  now?: () => number;
}

/**
 * Rules for users, their permissions and zone rights, personal tokens, DNS API keys and the
 * DNS IP whitelist. Used by the HTTP layer and by the admin CLI alike.
 */
export class AccountService {
  private readonly repo = new AccountRepository();
  private readonly users: CredentialCache<number, UserAuthState | null>;
  private readonly dnsKeys: CredentialCache<string, DnsKeyAuthRow | null>;
  private readonly sessionEndListeners: Array<(sessionId: string) => void> = [];

  constructor(
    private readonly orm: Orm,
    opts: AccountServiceOptions = {},
  ) {
    const ttl = opts.credentialCacheMs ?? 0;
    this.users = new CredentialCache(ttl, opts.now);
    this.dnsKeys = new CredentialCache(ttl, opts.now, (row) => row !== null);
  }

  /** Called when a signed-in session ends by signing out (the live hub closes its sockets). */
  onSessionEnd(listener: (sessionId: string) => void) {
    this.sessionEndListeners.push(listener);
  }

  /** A session signed out: whoever holds something of it lets go (its row is destroyed by the session store). */
  sessionEnded(sessionId: string) {
    for (const l of this.sessionEndListeners) l(sessionId);
  }

  /** The user's authentication state, from the cache when it is fresh. */
  private userState(id: number): Promise<UserAuthState | null> {
    return this.users.get(id, async () => {
      const user = await this.repo.findUserById(this.em(), id);
      return user ? { user: toAuthUser(user), tokenVersion: user.tokenVersion, disabled: user.disabledAt !== null } : null;
    });
  }

  private em(): EntityManager {
    return this.orm.em.fork();
  }

  // ---- users -------------------------------------------------------------------------------

  async createUser(input: {
    username: string;
    password?: string;
    email?: string | null;
    isAdmin?: boolean;
    permissions?: string[];
  }): Promise<{ user: AuthUser; password: string }> {
    if (!USERNAME_RE.test(input.username)) {
      throw invalid('username', 'must be 1-100 characters: letters, digits, dot, underscore, @ or dash, starting with a letter or digit');
    }
    const password = input.password ?? generatePassword();
    if (password.length < 8) throw invalid('password', 'must be at least 8 characters');
    const permissions = this.checkPermissions(input.permissions ?? []);
    const em = this.em();
    if (await this.repo.findUserByUsername(em, input.username)) {
      throw new AppError('conflict', `user "${input.username}" already exists`);
    }
    const user = em.create(User, {
      username: input.username,
      email: input.email ?? null,
      passwordHash: await hashPassword(password),
      isAdmin: input.isAdmin ?? false,
      permissions,
    });
    await em.flush();
    return { user: toAuthUser(user), password };
  }

  async listUsers(): Promise<AuthUser[]> {
    return (await this.repo.listUsers(this.em())).map(toAuthUser);
  }

  async findActiveUser(id: number): Promise<AuthUser | null> {
    const state = await this.userState(id);
    return state && !state.disabled ? state.user : null;
  }

  /**
   * The user a JWT names, when it is active and the token's version (claim `ver`, 0 when absent)
   * is still the user's: a password change or disable since the token was issued refuses it.
   */
  async findJwtUser(id: number, tokenVersion: number): Promise<AuthUser | null> {
    const state = await this.userState(id);
    return state && !state.disabled && state.tokenVersion === tokenVersion ? state.user : null;
  }

  /**
   * The active users among `ids` with their current token version (one query; disabled and
   * deleted users are left out): what a live socket authenticated earlier is checked against.
   */
  async activeUsersWithVersion(ids: number[]): Promise<Map<number, { user: AuthUser; tokenVersion: number }>> {
    if (!ids.length) return new Map();
    const users = await this.em().find(User, { id: { $in: [...new Set(ids)] }, disabledAt: null });
    return new Map(users.map((u) => [u.id, { user: toAuthUser(u), tokenVersion: u.tokenVersion }]));
  }

  /** The version that a JWT issued now for this user carries. */
  async tokenVersionOf(id: number): Promise<number> {
    const user = await this.repo.findUserById(this.em(), id);
    if (!user) throw new AppError('not_found', 'user not found');
    return user.tokenVersion;
  }

  async findUser(username: string): Promise<AuthUser | null> {
    const user = await this.repo.findUserByUsername(this.em(), username);
    return user ? toAuthUser(user) : null;
  }

  /** Checks a username and password; the same work is done whether or not the user exists. */
  async authenticatePassword(username: string, password: string): Promise<AuthUser> {
    const user = await this.repo.findUserByUsername(this.em(), username);
    const ok = await verifyPassword(password, user?.passwordHash ?? (await dummyPasswordHash()));
    if (!user || !ok) throw new AppError('invalid_credentials', 'Invalid username or password.');
    if (user.disabledAt) throw new AppError('account_disabled', 'This account is disabled.');
    return toAuthUser(user);
  }

  async setPassword(username: string, password: string): Promise<void> {
    if (password.length < 8) throw invalid('password', 'must be at least 8 characters');
    await this.updateUser(username, async (user, em) => {
      user.passwordHash = await hashPassword(password);
      // A password change ends every browser session of that user and invalidates their JWTs.
      user.tokenVersion += 1;
      await this.repo.endSessionsOf(dbOf(em), user.id);
    });
  }

  async setAdmin(username: string, isAdmin: boolean): Promise<AuthUser> {
    return this.updateUser(username, async (user, em) => {
      if (!isAdmin && user.isAdmin && (await this.repo.countAdmins(em)) <= 1) {
        throw new AppError('conflict', 'refusing to remove the last administrator');
      }
      user.isAdmin = isAdmin;
    });
  }

  async setDisabled(username: string, disabled: boolean): Promise<AuthUser> {
    return this.updateUser(username, async (user, em) => {
      if (disabled && user.isAdmin && !user.disabledAt && (await this.repo.countAdmins(em)) <= 1) {
        throw new AppError('conflict', 'refusing to disable the last active administrator');
      }
      user.disabledAt = disabled ? (user.disabledAt ?? new Date()) : null;
      // Disabling invalidates the JWTs issued so far: enabling again does not bring them back.
      if (disabled) user.tokenVersion += 1;
      if (disabled) await this.repo.endSessionsOf(dbOf(em), user.id);
    });
  }

  async grantPermissions(username: string, permissions: string[]): Promise<AuthUser> {
    const add = this.checkPermissions(permissions);
    return this.updateUser(username, async (user) => {
      user.permissions = [...new Set([...user.permissions, ...add])];
    });
  }

  async revokePermissions(username: string, permissions: string[]): Promise<AuthUser> {
    const remove = new Set(this.checkPermissions(permissions));
    return this.updateUser(username, async (user) => {
      user.permissions = user.permissions.filter((p) => !remove.has(p));
    });
  }

  private checkPermissions(values: string[]): Permission[] {
    const bad = values.filter((p) => !isPermission(p));
    if (bad.length) throw invalid('permissions', `unknown permission(s): ${bad.join(', ')}`);
    return values as Permission[];
  }

  /** Every change to a user (password, admin flag, disabled, permissions) goes through here; cached lookups drop at once. */
  private async updateUser(username: string, change: (user: User, em: EntityManager) => Promise<void>): Promise<AuthUser> {
    const em = this.em();
    try {
      return await em.transactional(async (tx) => {
        const user = await this.repo.findUserByUsername(tx, username);
        if (!user) throw new AppError('not_found', `no user named "${username}"`);
        await change(user, tx);
        await tx.flush();
        return toAuthUser(user);
      });
    } finally {
      credentialChanges.changed();
    }
  }

  // ---- DNS zone rights -----------------------------------------------------------------------

  async grantZone(username: string, zone: string, rights: { read: boolean; write: boolean }) {
    const name = normalizeZone(zone);
    const em = this.em();
    const user = await this.repo.findUserByUsername(em, username);
    if (!user) throw new AppError('not_found', `no user named "${username}"`);
    const row = (await this.repo.findZonePermission(em, user.id, name)) ?? em.create(DnsZonePermission, { user, zone: name });
    // Write implies read: a zone you can change but not list would be a trap.
    row.canRead = rights.read || rights.write;
    row.canWrite = rights.write;
    await em.flush();
    return { zone: row.zone, can_read: row.canRead, can_write: row.canWrite };
  }

  async revokeZone(username: string, zone: string): Promise<boolean> {
    const name = normalizeZone(zone);
    const em = this.em();
    const user = await this.repo.findUserByUsername(em, username);
    if (!user) throw new AppError('not_found', `no user named "${username}"`);
    const row = await this.repo.findZonePermission(em, user.id, name);
    if (!row) return false;
    await em.remove(row).flush();
    return true;
  }

  async zoneRights(userId: number): Promise<Array<{ zone: string; canRead: boolean; canWrite: boolean }>> {
    const rows = await this.repo.listZonePermissions(this.em(), userId);
    return rows.map((r) => ({ zone: r.zone, canRead: r.canRead, canWrite: r.canWrite }));
  }

  // ---- personal access tokens --------------------------------------------------------------

  async createPersonalToken(userId: number, input: { name: string; scopes: string[]; expiresInDays?: number }) {
    const bad = input.scopes.filter((s) => !isTokenScope(s));
    if (bad.length) throw invalid('scopes', `unknown scope(s): ${bad.join(', ')}`);
    if (!input.scopes.length) throw invalid('scopes', 'at least one scope is required');
    const name = checkLabel('name', input.name, 100);
    const expiresAt = expiryFrom(input.expiresInDays);
    const em = this.em();
    const user = await this.repo.findUserById(em, userId);
    if (!user) throw new AppError('not_found', 'user not found');
    const { secret, hash, displayPrefix } = newSecret(PERSONAL_TOKEN_PREFIX);
    const token = em.create(PersonalAccessToken, {
      user,
      name,
      scopes: [...new Set(input.scopes)] as TokenScope[],
      tokenHash: hash,
      prefix: displayPrefix,
      expiresAt,
      callbackSecret: randomBytes(32).toString('hex'),
    });
    await em.flush();
    return { token: secret, record: token, callbackSecret: token.callbackSecret as string };
  }

  /**
   * The built-in generator of the speech token API's token: a personal token named
   * `provider_speech_api` with scope `speech.api` and no expiry unless asked. It rotates: every
   * earlier unrevoked token of that name of the user is revoked in the same transaction (jobs it
   * submitted still get their callbacks, signed with its callback secret). The owner needs `speech.api` and `speech.use` (administrators have every permission), else 403.
   */
  async generateSpeechApiToken(userId: number, input: { expiresInDays?: number | undefined } = {}) {
    const expiresAt = expiryFrom(input.expiresInDays);
    return this.em().transactional(async (em) => {
      // The lock makes concurrent generations for one user take turns: one active token remains.
      const user = await this.repo.lockUser(em, userId);
      if (!user || user.disabledAt) throw new AppError('not_found', 'user not found');
      const missing = SPEECH_API_PERMISSIONS.filter((p) => !hasPermission(toAuthUser(user), p));
      if (missing.length) {
        throw new AppError(
          'forbidden',
          `A ${SPEECH_API_TOKEN_NAME} token needs the permissions ${SPEECH_API_PERMISSIONS.join(' and ')}; ${user.username} lacks ${missing.join(' and ')}.`,
        );
      }
      const previous = await this.repo.unrevokedTokensNamed(em, user.id, SPEECH_API_TOKEN_NAME);
      const now = new Date();
      for (const old of previous) old.revokedAt = now;
      const { secret, hash, displayPrefix } = newSecret(PERSONAL_TOKEN_PREFIX);
      const callbackSecret = randomBytes(32).toString('hex');
      const record = em.create(PersonalAccessToken, {
        user,
        name: SPEECH_API_TOKEN_NAME,
        scopes: ['speech.api'],
        tokenHash: hash,
        prefix: displayPrefix,
        expiresAt,
        callbackSecret,
      });
      await em.flush();
      return { token: secret, record, callbackSecret, revokedTokenIds: previous.map((t) => t.id) };
    });
  }

  /** Issues a new callback signing secret for one of the user's tokens (the old one stops verifying). */
  async rotateCallbackSecret(tokenId: number, ownerId: number): Promise<string | null> {
    const em = this.em();
    const token = await this.repo.findToken(em, tokenId);
    if (!token || token.user.id !== ownerId || token.revokedAt) return null;
    token.callbackSecret = randomBytes(32).toString('hex');
    await em.flush();
    return token.callbackSecret;
  }

  async listPersonalTokens(userId: number) {
    return this.repo.listTokens(this.em(), userId);
  }

  /** Revokes a token; with `ownerId` only if it belongs to that user. Returns false if not found. */
  async revokePersonalToken(tokenId: number, opts: { ownerId?: number } = {}): Promise<boolean> {
    const em = this.em();
    const token = await this.repo.findToken(em, tokenId);
    if (!token || (opts.ownerId !== undefined && token.user.id !== opts.ownerId)) return false;
    token.revokedAt ??= new Date();
    try {
      await em.flush();
    } finally {
      credentialChanges.changed();
    }
    return true;
  }

  /** Resolves a presented personal token; null when unknown, revoked, expired or its user is disabled. */
  async verifyPersonalToken(secret: string): Promise<{ user: AuthUser; tokenId: number; scopes: TokenScope[] } | null> {
    const em = this.em();
    const token = await this.repo.findTokenByHash(em, sha256Hex(secret));
    if (!token || token.revokedAt || (token.expiresAt && token.expiresAt <= new Date()) || token.user.disabledAt) {
      return null;
    }
    if (needsTouch(token.lastUsedAt)) await this.repo.touchToken(em, 'personal_access_tokens', token.id);
    return { user: toAuthUser(token.user), tokenId: token.id, scopes: [...token.scopes] };
  }

  // ---- DNS API keys and whitelist ----------------------------------------------------------

  async createDnsApiKey(input: { name: string; username?: string | undefined; expiresInDays?: number | undefined }) {
    const name = checkLabel('name', input.name, 100);
    const expiresAt = expiryFrom(input.expiresInDays);
    const em = this.em();
    let user: User | null = null;
    if (input.username) {
      user = await this.repo.findUserByUsername(em, input.username);
      if (!user) throw new AppError('not_found', `no user named "${input.username}"`);
    }
    const { secret, hash, displayPrefix } = newSecret(DNS_KEY_PREFIX);
    const key = em.create(DnsApiKey, {
      user,
      name,
      keyHash: hash,
      prefix: displayPrefix,
      expiresAt,
    });
    await em.flush();
    return { key: secret, id: key.id, global: user === null, expiresAt };
  }

  async listDnsApiKeys() {
    return this.repo.listDnsKeys(this.em());
  }

  async revokeDnsApiKey(id: number): Promise<boolean> {
    const em = this.em();
    const key = await this.repo.findDnsKey(em, id);
    if (!key) return false;
    key.revokedAt ??= new Date();
    try {
      await em.flush();
    } finally {
      credentialChanges.changed();
    }
    return true;
  }

  async verifyDnsApiKey(secret: string): Promise<{ keyId: number; user: AuthUser | null } | null> {
    const em = this.em();
    const hash = sha256Hex(secret);
    const key = await this.dnsKeys.get(hash, () => this.repo.dnsKeyForAuth(em, hash));
    if (!key || key.revoked_at || (key.expires_at && new Date(key.expires_at) <= new Date())) return null;
    if (key.user_id !== null && key.disabled_at) return null;
    if (needsTouch(key.last_used_at ? new Date(key.last_used_at) : null)) {
      await this.repo.touchToken(em, 'dns_api_keys', key.id);
      // The row may be cached: it now says what the table says, so the next request does not write again.
      key.last_used_at = new Date();
    }
    const user: AuthUser | null =
      key.user_id === null
        ? null
        : {
            id: Number(key.user_id),
            username: key.username ?? '',
            email: key.email,
            isAdmin: key.is_admin === true,
            permissions: [...((key.permissions ?? []) as Permission[])],
          };
    return { keyId: Number(key.id), user };
  }

  /** Adds a range (stored as its canonical network); re-adding an existing range updates its note. */
  async addWhitelist(cidr: string, note?: string) {
    const canonical = canonicalCidr(cidr);
    if (!canonical) throw invalid('cidr', `"${cidr}" is not an IPv4/IPv6 address or CIDR range`);
    if (note !== undefined && note.trim().length > 200) throw invalid('note', 'must be at most 200 characters');
    const em = this.em();
    const entry = (await this.repo.findWhitelistEntry(em, canonical)) ?? em.create(DnsIpWhitelistEntry, { cidr: canonical, note: null });
    if (note !== undefined) entry.note = note.trim() || null;
    await em.flush();
    return entry;
  }

  async removeWhitelist(cidr: string): Promise<boolean> {
    const canonical = canonicalCidr(cidr);
    if (!canonical) throw invalid('cidr', `"${cidr}" is not an IPv4/IPv6 address or CIDR range`);
    const em = this.em();
    const entry = await this.repo.findWhitelistEntry(em, canonical);
    if (!entry) return false;
    await em.remove(entry).flush();
    return true;
  }

  async listWhitelist() {
    return this.repo.listWhitelist(this.em());
  }

  async isWhitelisted(ip: string): Promise<boolean> {
    const entries = await this.repo.listWhitelist(this.em());
    return entries.length > 0 && new IpRangeSet(entries.map((e) => e.cidr)).has(ip);
  }
}

/**
 * `last_used_at` is recorded at most once a minute (touchToken's own condition); the row just read
 * tells whether this request would move it, so a busy key costs no UPDATE round trip per request.
 */
const needsTouch = (lastUsedAt: Date | null | undefined) => !lastUsedAt || Date.now() - lastUsedAt.getTime() >= 60_000;
