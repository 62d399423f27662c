import { DriverException } from '@mikro-orm/core';
import { describe, expect, it } from 'vitest';
import { unavailableDependency } from '../src/infra/unavailable.js';

/** What the drivers throw while PostgreSQL or Redis is away, as seen in fault runs, and what is a bug. */
describe('unavailableDependency', () => {
  it.each([
    ['a pg connection not ready in time (frozen server)', new Error('timeout expired')],
    ['the same through MikroORM', new DriverException(new Error('timeout expired'))],
    ['no answer within query_timeout, MikroORM prefixing the SQL', new DriverException(new Error('select 1 - Query read timeout'))],
    ['the knex pool', Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full.'), { name: 'KnexTimeoutError' })],
    ['a lost connection', new Error('Connection terminated unexpectedly')],
    ['a refused socket', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['statement_timeout', Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' })],
  ])('%s: database', (_, err) => {
    expect(unavailableDependency(err)).toBe('database');
  });

  it('ioredis giving up: redis', () => {
    expect(unavailableDependency(Object.assign(new Error('Reached the max retries per request limit'), { name: 'MaxRetriesPerRequestError' }))).toBe('redis');
  });

  it.each([
    ['a syntax error', Object.assign(new Error('syntax error at or near "selec"'), { code: '42601' })],
    ['a unique violation', Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' })],
    ['a message that only mentions a timeout', new Error('the upload timeout expired for job 7')],
  ])('%s: a bug or a rule, not an outage', (_, err) => {
    expect(unavailableDependency(err)).toBeNull();
  });
});
