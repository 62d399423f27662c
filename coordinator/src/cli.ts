#!/usr/bin/env node
import { registerAssistantCommands } from './cli/assistant.js';
import { registerDatabaseCommands } from './cli/database.js';
import { registerDnsKeyCommands, registerDyndnsCommands, registerWhitelistCommands } from './cli/dns-access.js';
import { registerDnsProviderCommands, registerDnsZoneCommands } from './cli/dns.js';
import { registerIrcImportCommands } from './cli/irc-import.js';
import { registerIrcCommands } from './cli/irc.js';
import { program } from './cli/program.js';
import { registerTokenCommands, registerUserCommands, registerZoneRightCommands } from './cli/users.js';
import { registerWorkerCommands } from './cli/workers.js';

/**
 * Admin CLI: `npm run cli -- <command>`. Each command goes through its domain's service or
 * repository (accounts, DNS zones and providers, dynamic DNS, workers, the chat-log archive, the
 * assistant), so the CLI obeys the same rules as the HTTP API. Needs DATABASE_URL, or a quick
 * start's embedded database; REDIS_URL, when set, lets commands that change users, keys or the
 * archive tell the running coordinators (cli/runner.ts). Only `db:migrate` migrates: every other
 * command checks in one query that the schema is current and otherwise says to run it (the
 * coordinator also migrates when it starts). The ORM and the services are imported only by the
 * commands that use them, so --help and argument errors answer at once.
 *
 * One file per domain under cli/; cli/runner.ts opens the database around a command, cli/errors.ts
 * turns failures into one line and an exit code, cli/format.ts prints tables. Registration order
 * is the order --help lists the commands in.
 */

registerDatabaseCommands();
registerUserCommands();
registerZoneRightCommands();
registerDnsZoneCommands();
registerDnsProviderCommands();
registerTokenCommands();
registerDyndnsCommands();
registerDnsKeyCommands();
registerWhitelistCommands();
registerWorkerCommands();
registerIrcImportCommands();
registerIrcCommands();
registerAssistantCommands();

await program.parseAsync();
