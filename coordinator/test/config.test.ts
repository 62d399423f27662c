import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

const base = {
  DATABASE_URL: 'postgres://u:p@localhost:5432/db',
  REDIS_URL: 'redis://localhost:6379',
  SESSION_SECRET: 'x'.repeat(32),
  JWT_SECRET: 'y'.repeat(32),
};

function issues(env: Record<string, string | undefined>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('configuration', () => {
  it('applies documented defaults', () => {
    const c = loadConfig(base);
    expect(c.PORT).toBe(8080);
    expect(c.GRPC_PORT).toBe(50051);
    expect(c.PUBLIC_BASE_URL).toBe('http://localhost:8080');
    expect(c.METRICS_ALLOW).toEqual(['127.0.0.0/8', '::1/128']);
    expect(c.TRUST_PROXY).toBe(false);
    expect(c.JWT_TTL_SECONDS).toBe(3600);
  });

  it('names each missing required variable', () => {
    const found = issues({});
    for (const name of ['DATABASE_URL', 'REDIS_URL', 'SESSION_SECRET', 'JWT_SECRET']) {
      expect(found.some((i) => i.startsWith(`${name}:`) && i.includes('it is not set'))).toBe(true);
    }
  });

  it('names the variable with a bad value', () => {
    expect(issues({ ...base, PORT: 'eighty' })).toEqual([expect.stringMatching(/^PORT: .*invalid value/)]);
    expect(issues({ ...base, DATABASE_URL: 'mysql://x@y/z' })[0]).toMatch(/^DATABASE_URL: must be a postgres:\/\/ URL/);
    expect(issues({ ...base, SESSION_SECRET: 'short' })[0]).toMatch(/^SESSION_SECRET: must be at least 32 characters/);
    expect(issues({ ...base, METRICS_ALLOW: '10.0.0.0/8,not-an-ip' })[0]).toMatch(/^METRICS_ALLOW/);
    expect(issues({ ...base, COOKIE_SECURE: 'maybe' })[0]).toMatch(/^COOKIE_SECURE/);
    expect(() => loadConfig({ ...base, TRUST_PROXY: 'everyone' })).toThrow(/TRUST_PROXY/);
  });

  it('parses lists, booleans and trust-proxy forms; empty strings mean unset', () => {
    const c = loadConfig({ ...base, METRICS_ALLOW: '10.0.0.0/8, ::1', METRICS_ENABLED: 'false', TRUST_PROXY: '10.0.0.1,10.0.0.2', PORT: '' });
    expect(c.METRICS_ALLOW).toEqual(['10.0.0.0/8', '::1']);
    expect(c.METRICS_ENABLED).toBe(false);
    expect(c.TRUST_PROXY).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(c.PORT).toBe(8080);
    expect(loadConfig({ ...base, TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(loadConfig({ ...base, PUBLIC_BASE_URL: 'https://speech.example.org/' }).PUBLIC_BASE_URL).toBe('https://speech.example.org');
  });
});
