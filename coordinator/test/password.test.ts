import { describe, expect, it } from 'vitest';
import { hashPassword, verifyPassword } from '../src/accounts/password.js';
import { classifySecret, newSecret, PERSONAL_TOKEN_PREFIX, sha256Hex } from '../src/accounts/secrets.js';

describe('password hashing (scrypt)', () => {
  it('verifies the right password only, with a per-hash salt', async () => {
    const a = await hashPassword('correct horse');
    const b = await hashPassword('correct horse');
    expect(a).toMatch(/^scrypt\$15\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword('correct horse', a)).toBe(true);
    expect(await verifyPassword('correct horsf', a)).toBe(false);
    expect(await verifyPassword('correct horse', 'plain-text')).toBe(false);
  });

  it('keeps verifying hashes made with other cost parameters', async () => {
    const a = await hashPassword('pw');
    const weaker = a.replace(/^scrypt\$15\$/, 'scrypt$14$');
    // Same salt and key but a different N must not verify: the parameters are part of the hash.
    expect(await verifyPassword('pw', weaker)).toBe(false);
  });
});

describe('bearer secrets', () => {
  it('are prefixed, random, and stored as SHA-256', () => {
    const s = newSecret(PERSONAL_TOKEN_PREFIX);
    expect(s.secret.startsWith(PERSONAL_TOKEN_PREFIX)).toBe(true);
    expect(s.secret.length).toBeGreaterThan(50);
    expect(s.hash).toBe(sha256Hex(s.secret));
    expect(newSecret(PERSONAL_TOKEN_PREFIX).secret).not.toBe(s.secret);
    expect(classifySecret(s.secret)).toBe('personal_token');
    expect(classifySecret('sonar_dns_abc')).toBe('dns_api_key');
    expect(classifySecret('aaa.bbb.ccc')).toBe('jwt');
    expect(classifySecret('hunter2')).toBe('unknown');
  });
});
