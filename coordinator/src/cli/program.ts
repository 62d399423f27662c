import { Command } from 'commander';

/** Exit code for a configuration the CLI cannot run with (sysexits EX_CONFIG). */
export const EX_CONFIG = 78;

/** What a command produced: `json` for --json (one object), `text` lines for people. */
export type Result = { json: Record<string, unknown>; text: string[] };

export const program = new Command('sonar-cli')
  .description('Administer sonar users, permissions, zone rights, tokens, DNS API keys, the DNS IP whitelist and worker agents.')
  .option('--json', 'print one machine-readable JSON object instead of text')
  .showHelpAfterError();

export const jsonMode = () => program.opts<{ json?: boolean }>().json === true;
