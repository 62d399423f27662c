import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * The SQL boundary (docs/architecture.md) is enforced by the project's own ESLint configuration:
 * this runs ESLint's API with eslint.config.js on real source files with one line added, so a new
 * raw statement or SQL string outside a repository module fails `npm run lint`.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: ROOT });

/** The no-restricted-syntax messages ESLint reports for `file` with `added` appended to it. */
async function boundaryErrors(file: string, added: string): Promise<string[]> {
  const text = `${readFileSync(path.join(ROOT, file), 'utf8')}\n${added}\n`;
  const [result] = await eslint.lintText(text, { filePath: path.join(ROOT, file) });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-syntax' || m.fatal).map((m) => m.message);
}

describe('the SQL boundary lint rule', () => {
  it('passes the files as they are', async () => {
    expect(await boundaryErrors('coordinator/src/dns/access.ts', '')).toEqual([]);
  });

  it('rejects knex raw(), MikroORM getConnection() (and its execute()) and knex.client outside db/sql.ts', async () => {
    const errors = await boundaryErrors(
      'coordinator/src/dns/access.ts',
      [
        'export const a = (knex: { raw(s: string): unknown }) => knex.raw(`x`);',
        'export const b = (em: { getConnection(): { execute(s: string): unknown } }) => em.getConnection().execute(`x`);',
        'export const c = (knex: { client: unknown }) => knex.client;',
      ].join('\n'),
    );
    expect(errors).toEqual([
      expect.stringMatching(/^knex raw\(\)/),
      expect.stringMatching(/^getConnection\(\)\.execute\(\)/),
      expect.stringMatching(/^MikroORM's connection/),
      expect.stringMatching(/^knex's untyped client/),
    ]);
  });

  it('rejects SQL text outside repository modules, in strings and templates', async () => {
    const errors = await boundaryErrors(
      'coordinator/src/accounts/account-service.ts',
      ["export const d = 'delete from web_sessions where user_id = ?';", 'export const e = `select id from users where username = ${String(1)}`;'].join('\n'),
    );
    expect(errors).toHaveLength(2);
    for (const e of errors) expect(e).toMatch(/^SQL text belongs in a repository module/);
  });

  it('lets a repository module hold SQL text, but not reach PostgreSQL other than through db/sql.ts', async () => {
    expect(
      await boundaryErrors('coordinator/src/accounts/account-repository.ts', "export const f = 'delete from web_sessions where user_id = :userId';"),
    ).toEqual([]);
    const errors = await boundaryErrors(
      'coordinator/src/accounts/account-repository.ts',
      'export const g = (knex: { raw(s: string): unknown }) => knex.raw(`x`);',
    );
    expect(errors).toEqual([expect.stringMatching(/^knex raw\(\)/)]);
  });

  it('leaves words that are not SQL alone', async () => {
    expect(await boundaryErrors('coordinator/src/dns/access.ts', "export const h = ['select a zone', 'begin', 'update the record'];")).toEqual([]);
  });
});
