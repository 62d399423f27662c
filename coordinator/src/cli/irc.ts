import { Option } from 'commander';
import { ConfigError, envSchema } from '../config.js';
import { IRC_SOURCES, type IrcSource } from '../irc/import-service.js';
import type { IrcLoggerConfig } from '../irc/live-logger.js';
import { table } from './format.js';
import { EX_CONFIG, program } from './program.js';
import { runWith } from './runner.js';

/** `irc:common-terms`, `irc:alias:*` and `irc:logger`: the archive's upkeep and the live logger. */
export function registerIrcCommands(): void {
  program
    .command('irc:common-terms')
    .description(
      "choose the archive's most frequent words again; pair counts of its common words with its frequent words let a search for a word less a common word be counted without reading rows (imports and the maintenance queue also do this)",
    )
    .option('--list', 'only list the current common and frequent terms')
    .action(
      runWith(async (orm) => new (await import('../irc/common-terms.js')).IrcCommonTerms(orm), { archiveWriter: true })(async (svc, o: { list?: boolean }) => {
        if (o.list) {
          const l = await svc.list();
          return {
            json: { ...l },
            text: l.frequent.length
              ? [`common (${l.common.length}): ${l.common.join(' ')}`, `frequent (${l.frequent.length}): ${l.frequent.join(' ')}`]
              : ['no common terms (an empty archive, or none chosen yet)'],
          };
        }
        const r = await svc.refresh();
        return {
          json: { ...r },
          text: [
            `${r.common.length} common term(s): ${r.common.join(' ') || '(none)'}; ${r.frequent} frequent term(s)`,
            `${r.changed} term(s) changed place${r.rebuilt ? '; every pair count recounted in one pass' : ''}`,
          ],
        };
      }),
    );

  const runAliases = runWith(async (orm) => new (await import('../irc/alias-service.js')).IrcAliasService(orm), { archiveWriter: true });
  const aliasSource = () => new Option('--source <source>', 'archive the network belongs to').choices([...IRC_SOURCES]).default('production');

  program
    .command('irc:alias:add <nick> <alias>')
    .description('link two nicks as one person: the nick filter and nick profiles then cover both (undoes an earlier removal)')
    .requiredOption('--network <name>', 'network name')
    .addOption(aliasSource())
    .action(
      runAliases(async (svc, nick: string, alias: string, o: { network: string; source: IrcSource }) => {
        await svc.add(o.source, o.network, nick, alias);
        return { json: { network: o.network, nick, alias }, text: [`linked ${nick} and ${alias} on ${o.network} (${o.source})`] };
      }),
    );

  program
    .command('irc:alias:remove <nick> <alias>')
    .description('unlink two nicks, also a link learnt from a nick change; re-importing logs does not bring it back')
    .requiredOption('--network <name>', 'network name')
    .addOption(aliasSource())
    .action(
      runAliases(async (svc, nick: string, alias: string, o: { network: string; source: IrcSource }) => {
        const removed = await svc.remove(o.source, o.network, nick, alias);
        return {
          json: { network: o.network, nick, alias, removed },
          text: [removed ? `unlinked ${nick} and ${alias}` : `${nick} and ${alias} were not linked; the pair is now blocked from linking`],
        };
      }),
    );

  program
    .command('irc:alias:list [nick]')
    .description('nick links of a network (learnt from nick changes or made by admins), optionally only those of one nick')
    .requiredOption('--network <name>', 'network name')
    .addOption(aliasSource())
    .action(
      runAliases(async (svc, nick: string | undefined, o: { network: string; source: IrcSource }) => {
        const links = await svc.list(o.source, o.network, nick);
        return {
          json: { links },
          text: table(
            ['NICK', 'ALIAS', 'ORIGIN', 'STATE'],
            links.map((l) => [l.nick, l.alias, l.origin, l.blocked ? 'removed' : 'linked']),
            'no links',
          ),
        };
      }),
    );

  program
    .command('irc:logger')
    .description('run the live IRC logger (networks and channels from a JSON file; README "Live logger") until SIGINT/SIGTERM')
    .addOption(new Option('--config <file>', 'logger configuration file (JSON)').env('IRC_LOGGER_CONFIG').makeOptionMandatory())
    .action(async (o: { config: string }) => {
      const [{ IrcLiveLogger, loadIrcLoggerConfig }, { IrcEventStore }, { default: pino }] = await Promise.all([
        import('../irc/live-logger.js'),
        import('../irc/event-store.js'),
        import('pino'),
      ]);
      let config: IrcLoggerConfig;
      try {
        config = loadIrcLoggerConfig(o.config);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        console.error(err.message);
        process.exitCode = EX_CONFIG;
        return;
      }
      await runWith((orm) => orm, { archiveWriter: true })(async (orm) => {
        const level = envSchema.shape.LOG_LEVEL.safeParse(process.env.LOG_LEVEL || undefined);
        // Logs go to stderr; stdout carries only the summary printed at the end.
        const logger = pino({ level: level.success ? level.data : 'info' }, pino.destination(2));
        const irc = new IrcLiveLogger({ config, store: new IrcEventStore(orm), logger });
        let onSignal: (s: NodeJS.Signals) => void = () => undefined;
        const signalled = new Promise<NodeJS.Signals>((resolve) => {
          onSignal = resolve;
          process.once('SIGINT', onSignal);
          process.once('SIGTERM', onSignal);
        });
        try {
          await irc.start();
          logger.info({ networks: config.networks.map((n) => n.name) }, 'irc logger running; SIGINT or SIGTERM stops it');
          logger.info({ signal: await signalled }, 'irc logger stopping');
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
          await irc.stop();
        }
        const networks = irc
          .status()
          .map((s) => ({ network: s.network, source: s.source, written: s.written, dropped: s.dropped, registrations: s.registrations }));
        return {
          json: { networks },
          text: networks.map((n) => `${n.network} (${n.source}): ${n.written} row(s) written${n.dropped ? `, ${n.dropped} dropped` : ''}`),
        };
      })();
    });
}
