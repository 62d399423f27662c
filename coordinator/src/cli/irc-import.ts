import { Option } from 'commander';
import { IRC_IMPORT_FORMATS, IRC_SOURCES, IrcImportService, type IrcSource } from '../irc/import-service.js';
import { fail } from './errors.js';
import { table } from './format.js';
import { program } from './program.js';
import { runWith } from './runner.js';

/** `irc:import`, `irc:imports`, `irc:import:revert`, `irc:delete`: putting logs into the archive and taking them out again. */
export function registerIrcImportCommands(): void {
  const runIrc = runWith((orm) => new IrcImportService(orm), { archiveWriter: true });

  program
    .command('irc:import <paths...>')
    .description(
      'import chat-log files (files or folders, walked recursively) into a network; re-importing adds nothing twice. Exits 2 when files were passed over or lines matched no parser',
    )
    .requiredOption('--network <name>', 'network name (created when missing)')
    .addOption(new Option('--source <source>', 'archive the network belongs to').choices([...IRC_SOURCES]).makeOptionMandatory())
    .option('--format <format>', `log format (${IRC_IMPORT_FORMATS.join(', ')}); auto detects it once per channel from a sample of its files`, 'auto')
    .option('--tz <zone>', 'IANA time zone the log times are in (converted to UTC); lines with their own offset keep it', 'UTC')
    .option('--channel <name>', 'channel (or query nick) of every file, for logs whose paths do not say')
    .option(
      '--path <pattern>',
      "where channel and day are in the paths, e.g. '{channel}/{yyyy}/{mm}/{dd}.log' ({channel} {yyyy} {mm} {dd} {date} {yyyymmdd} {network} *)",
    )
    .option('--date <YYYY-MM-DD>', 'day of the first line of a single time-only log whose path does not say (refused with more than one file)')
    .option('--dry-run', 'parse everything and report what would be stored; write nothing')
    .option('--max-unparsed <n>', 'lines matching no parser tolerated before the import counts as incomplete', '0')
    .option('--allow-unparsed', 'list lines matching no parser but do not fail because of them')
    .action(
      runIrc(
        async (
          irc,
          paths: string[],
          o: {
            network: string;
            source: IrcSource;
            format: string;
            tz: string;
            channel?: string;
            date?: string;
            path?: string;
            dryRun?: boolean;
            maxUnparsed: string;
            allowUnparsed?: boolean;
          },
        ) => {
          if (!/^\d{1,9}$/.test(o.maxUnparsed)) fail('validation_failed', `--max-unparsed: "${o.maxUnparsed}" is not a whole number`);
          const c = await irc.importPaths(paths, {
            network: o.network,
            source: o.source,
            format: o.format,
            timeZone: o.tz,
            ...(o.channel !== undefined ? { channel: o.channel } : {}),
            ...(o.date !== undefined ? { date: o.date } : {}),
            ...(o.path !== undefined ? { pathPattern: o.path } : {}),
            dryRun: o.dryRun === true,
            maxUnparsed: Number(o.maxUnparsed),
            allowUnparsed: o.allowUnparsed === true,
          });
          // Rows that parsed are stored either way; a non-zero exit says the archive is not the whole of the logs.
          if (c.problems.length) process.exitCode = 2;
          return {
            json: { ...c },
            text: [
              `${c.dryRun ? 'dry run (nothing written): ' : ''}files ${c.files}, lines ${c.lines}, ${c.dryRun ? 'would insert' : 'inserted'} ${c.inserted}, skipped ${c.skipped} (${skippedParts(c)})` +
                (c.batchId !== null ? `, batch ${c.batchId}` : ''),
              ...Object.entries(c.formats).map(([f, n]) => `format ${f}: ${n} file(s)`),
              ...c.channels.map(
                (ch) =>
                  `${ch.kind === 'folder' ? 'folder (its paths name no channel)' : 'channel'} ${ch.channel}: ${ch.files} file(s) ${ch.format ? `read as ${ch.format}` : 'in no known format'}; alone detected as ${Object.entries(
                    ch.detected,
                  )
                    .map(([f, n]) => `${f} ${n}`)
                    .join(', ')}`,
              ),
              ...c.controlFiles.flatMap((f) => [
                `control characters removed: ${f.path}: ${f.count} line(s)`,
                ...f.lines.map((l) => `  line ${l.lineNo}: ${l.text}`),
                ...(f.count > f.lines.length ? [`  … ${f.count - f.lines.length} more`] : []),
              ]),
              ...c.outOfRangeFiles.flatMap((f) => [
                `out of range (not imported): ${f.path}: ${f.count} line(s)`,
                ...f.lines.map((l) => `  line ${l.lineNo}: ${l.text}`),
                ...(f.count > f.lines.length ? [`  … ${f.count - f.lines.length} more`] : []),
              ]),
              ...c.warnings.map((w) => `warning: ${w}`),
              ...(c.commonTerms?.changed
                ? [`common terms: ${c.commonTerms.changed} term(s) changed place${c.commonTerms.rebuilt ? '; every pair count recounted' : ''}`]
                : []),
              ...c.unparsedFiles.flatMap((f) => [
                `unparsed: ${f.path}: ${f.count} line(s)`,
                ...f.lines.map((l) => `  line ${l.lineNo}: ${l.text}`),
                ...(f.count > f.lines.length ? [`  … ${f.count - f.lines.length} more`] : []),
              ]),
              ...c.ignoredFiles.map((f) => `not imported: ${f.path}: ${f.reason}`),
              ...c.problems.map((p) => `error: ${p}`),
              ...(c.problems.length && c.batchId !== null ? [`(the rows that parsed are stored; undo with irc:import:revert ${c.batchId})`] : []),
            ],
          };
        },
      ),
    );

  const runCorrections = runWith(async (orm) => new (await import('../irc/correction-service.js')).IrcCorrectionService(orm), { archiveWriter: true });

  program
    .command('irc:imports')
    .description('list import batches (newest first) with their counts and the rows each still has')
    .option('--network <name>', 'only this network')
    .addOption(new Option('--source <source>', 'only this archive').choices([...IRC_SOURCES]))
    .action(
      runCorrections(async (svc, o: { network?: string; source?: IrcSource }) => {
        const batches = await svc.listBatches({ ...(o.network ? { network: o.network } : {}), ...(o.source ? { source: o.source } : {}) });
        return {
          json: { batches },
          text: table(
            ['BATCH', 'STARTED (UTC)', 'NETWORK', 'FILES', 'LINES', 'INSERTED', 'ROWS NOW', 'UNPARSED', 'STATE', 'OPTIONS', 'PATHS'],
            batches.map((b) => [
              String(b.id),
              b.started_at,
              `${b.network} (${b.source})`,
              String(b.files),
              String(b.lines),
              String(b.inserted),
              String(b.rows),
              String(b.unparsed),
              b.reverted_at ? `reverted ${b.reverted_at}` : b.finished_at ? 'done' : 'unfinished',
              Object.entries(b.options)
                .map(([k, v]) => `${k}=${String(v)}`)
                .join(' '),
              b.paths.join(' '),
            ]),
            'no import batches',
          ),
        };
      }),
    );

  program
    .command('irc:import:revert <batch>')
    .description('remove every row an import batch added (channel counters, nick statistics and nick links follow); then re-import with the right options')
    .option('--dry-run', 'count what would be removed; change nothing')
    .action(
      runCorrections(async (svc, batch: string, o: { dryRun?: boolean }) => {
        if (!/^\d{1,9}$/.test(batch)) fail('validation_failed', `batch: "${batch}" is not a batch number (irc:imports lists them)`);
        const r = await svc.revertBatch(Number(batch), { dryRun: o.dryRun === true });
        return {
          json: { ...r },
          text: [
            `${r.dryRun ? 'dry run: would remove' : 'removed'} ${r.deleted} row(s) of batch ${r.batch} (${r.network}) in ${r.channels} channel(s); ${r.nicks} nick(s) recounted, ${r.linksRemoved} nick link(s) removed`,
          ],
        };
      }),
    );

  program
    .command('irc:delete')
    .description('delete rows of a network, optionally of one channel and a UTC time range; channel counters, nick statistics and nick links follow')
    .requiredOption('--network <name>', 'network name')
    .addOption(new Option('--source <source>', 'archive the network belongs to').choices([...IRC_SOURCES]).default('production'))
    .option('--channel <name>', 'only this channel')
    .option('--from <when>', 'UTC, inclusive: YYYY-MM-DD or "YYYY-MM-DD HH:MM:SS"')
    .option('--to <when>', 'UTC, inclusive: YYYY-MM-DD (the whole day) or "YYYY-MM-DD HH:MM:SS"')
    .option('--dry-run', 'count what would be deleted; change nothing')
    .action(
      runCorrections(async (svc, o: { network: string; source: IrcSource; channel?: string; from?: string; to?: string; dryRun?: boolean }) => {
        const r = await svc.deleteRows({
          network: o.network,
          source: o.source,
          ...(o.channel !== undefined ? { channel: o.channel } : {}),
          ...(o.from !== undefined ? { from: o.from } : {}),
          ...(o.to !== undefined ? { to: o.to } : {}),
          dryRun: o.dryRun === true,
        });
        return {
          json: { ...r },
          text: [
            `${r.dryRun ? 'dry run: would delete' : 'deleted'} ${r.deleted} row(s) in ${r.channels} channel(s); ${r.nicks} nick(s) recounted, ${r.linksRemoved} nick link(s) removed`,
          ],
        };
      }),
    );
}

/** What `skipped` is made of: `3 unparsed, 5 already imported` (and lines dated out of range, and non-event lines such as day markers). */
function skippedParts(c: { skipped: number; unparsed: number; duplicates: number; outOfRange: number }): string {
  const other = c.skipped - c.unparsed - c.duplicates - c.outOfRange;
  return [
    `${c.unparsed} unparsed`,
    `${c.duplicates} duplicates (already imported)`,
    ...(c.outOfRange ? [`${c.outOfRange} dated out of range`] : []),
    ...(other > 0 ? [`${other} not events (day markers, log headers)`] : []),
  ].join(', ');
}
