import type { z } from 'zod';
import type { tokenSummarySchema, userSummarySchema } from '@sonar/shared';
import type { PersonalAccessToken } from './entities.js';
import type { AuthUser } from './types.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function presentUser(user: AuthUser): z.infer<typeof userSummarySchema> {
  return {
    id: user.id,
    username: user.username,
    email: user.email,
    is_admin: user.isAdmin,
    permissions: user.permissions,
  };
}

export function presentToken(token: PersonalAccessToken): z.infer<typeof tokenSummarySchema> {
  return {
    id: token.id,
    name: token.name,
    scopes: token.scopes,
    prefix: token.prefix,
    created_at: token.createdAt.toISOString(),
    expires_at: iso(token.expiresAt),
    last_used_at: iso(token.lastUsedAt),
    revoked_at: iso(token.revokedAt),
  };
}
