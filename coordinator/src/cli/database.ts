import { runWith } from './runner.js';
import { program } from './program.js';

/** `db:migrate`: the one command that changes the schema. */
export function registerDatabaseCommands(): void {
  program
    .command('db:migrate')
    .description('apply pending database migrations (needed once on a new database and after an upgrade; the coordinator also applies them when it starts)')
    .action(
      runWith((orm) => orm, { migrate: true })(async (orm) => {
        const { migrate } = await import('../db/orm.js');
        const applied = await migrate(orm);
        return { json: { applied }, text: applied.length ? applied.map((name) => `applied ${name}`) : ['the database schema is up to date'] };
      }),
    );
}
