import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import type { Permission, TokenScope } from '@sonar/shared';

/** Persistent account records. They stay inside the service; presenters turn them into wire JSON. */

export class User {
  [OptionalProps]?: 'email' | 'isAdmin' | 'permissions' | 'disabledAt' | 'tokenVersion' | 'createdAt' | 'updatedAt';
  id!: number;
  username!: string;
  email: string | null = null;
  passwordHash!: string;
  isAdmin = false;
  permissions: Permission[] = [];
  disabledAt: Date | null = null;
  /** JWTs carry it (claim `ver`) and stop working once it moves on: bumped on password change and disable. */
  tokenVersion = 0;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

export class DnsZonePermission {
  [OptionalProps]?: 'canRead' | 'canWrite' | 'createdAt';
  id!: number;
  user!: User;
  zone!: string;
  canRead = true;
  canWrite = false;
  createdAt: Date = new Date();
}

export class PersonalAccessToken {
  [OptionalProps]?: 'scopes' | 'createdAt' | 'expiresAt' | 'lastUsedAt' | 'revokedAt' | 'callbackSecret';
  id!: number;
  user!: User;
  name!: string;
  scopes: TokenScope[] = [];
  tokenHash!: string;
  prefix!: string;
  createdAt: Date = new Date();
  expiresAt: Date | null = null;
  lastUsedAt: Date | null = null;
  revokedAt: Date | null = null;
  /** Signs terminal callbacks of jobs this token submits (HMAC-SHA256); null until first needed. */
  callbackSecret: string | null = null;
}

export class DnsApiKey {
  [OptionalProps]?: 'user' | 'createdAt' | 'expiresAt' | 'lastUsedAt' | 'revokedAt';
  id!: number;
  /** null: a global key (access_type api_key_global); else the key acts as this user. */
  user: User | null = null;
  name!: string;
  keyHash!: string;
  prefix!: string;
  createdAt: Date = new Date();
  expiresAt: Date | null = null;
  lastUsedAt: Date | null = null;
  revokedAt: Date | null = null;
}

export class DnsIpWhitelistEntry {
  [OptionalProps]?: 'note' | 'createdAt';
  id!: number;
  cidr!: string;
  note: string | null = null;
  createdAt: Date = new Date();
}

export class WebSession {
  [OptionalProps]?: 'userId' | 'updatedAt';
  /** SHA-256 of the session id; the raw id only lives in the signed cookie. */
  idHash!: string;
  data!: Record<string, unknown>;
  userId: number | null = null;
  expiresAt!: Date;
  updatedAt: Date = new Date();
}

const timestamps = {
  createdAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'created_at' },
} as const;

export const UserSchema = new EntitySchema<User>({
  class: User,
  tableName: 'users',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    username: { type: 'string', length: 100 },
    email: { type: 'string', length: 320, nullable: true },
    passwordHash: { type: 'text', fieldName: 'password_hash' },
    isAdmin: { type: 'boolean', fieldName: 'is_admin', default: false },
    permissions: { type: 'string[]', columnType: 'text[]', default: '{}' },
    disabledAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'disabled_at', nullable: true },
    tokenVersion: { type: 'integer', fieldName: 'token_version', default: 0 },
    ...timestamps,
    updatedAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'updated_at', onUpdate: () => new Date() },
  },
});

export const DnsZonePermissionSchema = new EntitySchema<DnsZonePermission>({
  class: DnsZonePermission,
  tableName: 'dns_zone_permissions',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    user: { kind: 'm:1', entity: () => User, fieldName: 'user_id', deleteRule: 'cascade' },
    zone: { type: 'string', length: 253 },
    canRead: { type: 'boolean', fieldName: 'can_read', default: true },
    canWrite: { type: 'boolean', fieldName: 'can_write', default: false },
    ...timestamps,
  },
});

export const PersonalAccessTokenSchema = new EntitySchema<PersonalAccessToken>({
  class: PersonalAccessToken,
  tableName: 'personal_access_tokens',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    user: { kind: 'm:1', entity: () => User, fieldName: 'user_id', deleteRule: 'cascade' },
    name: { type: 'string', length: 100 },
    scopes: { type: 'string[]', columnType: 'text[]', default: '{}' },
    tokenHash: { type: 'string', length: 64, fieldName: 'token_hash' },
    prefix: { type: 'string', length: 32 },
    ...timestamps,
    expiresAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'expires_at', nullable: true },
    lastUsedAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'last_used_at', nullable: true },
    revokedAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'revoked_at', nullable: true },
    callbackSecret: { type: 'string', length: 64, fieldName: 'callback_secret', nullable: true },
  },
});

export const DnsApiKeySchema = new EntitySchema<DnsApiKey>({
  class: DnsApiKey,
  tableName: 'dns_api_keys',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    user: { kind: 'm:1', entity: () => User, fieldName: 'user_id', nullable: true, deleteRule: 'cascade' },
    name: { type: 'string', length: 100 },
    keyHash: { type: 'string', length: 64, fieldName: 'key_hash' },
    prefix: { type: 'string', length: 32 },
    ...timestamps,
    expiresAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'expires_at', nullable: true },
    lastUsedAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'last_used_at', nullable: true },
    revokedAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'revoked_at', nullable: true },
  },
});

export const DnsIpWhitelistSchema = new EntitySchema<DnsIpWhitelistEntry>({
  class: DnsIpWhitelistEntry,
  tableName: 'dns_ip_whitelist',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    cidr: { type: 'string', length: 64 },
    note: { type: 'string', length: 200, nullable: true },
    ...timestamps,
  },
});

export const WebSessionSchema = new EntitySchema<WebSession>({
  class: WebSession,
  tableName: 'web_sessions',
  properties: {
    idHash: { type: 'string', length: 64, primary: true, fieldName: 'id_hash' },
    data: { type: 'json', columnType: 'jsonb' },
    userId: { type: 'integer', fieldName: 'user_id', nullable: true },
    expiresAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'expires_at' },
    updatedAt: { type: 'datetime', columnType: 'timestamptz', fieldName: 'updated_at' },
  },
});

export const accountSchemas = [UserSchema, DnsZonePermissionSchema, PersonalAccessTokenSchema, DnsApiKeySchema, DnsIpWhitelistSchema, WebSessionSchema];
