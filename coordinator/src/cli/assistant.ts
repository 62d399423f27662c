import { Option } from 'commander';
import type { AuthUser } from '../accounts/types.js';
import { envSchema } from '../config.js';
import { readFileSync } from 'node:fs';
import { fail } from './errors.js';
import { positiveInt, table } from './format.js';
import { program } from './program.js';
import { runWith } from './runner.js';

const runAssistant = runWith(async (orm) => {
  const { AssistantService } = await import('../assistant/assistant-service.js');
  const env = envSchema
    .pick({
      ASSISTANT_SECRET_KEY: true,
      ASSISTANT_EXTRA_CA_FILE: true,
      ASSISTANT_UPSTREAM_TIMEOUT_SECONDS: true,
      ASSISTANT_RATE_LIMIT_PER_MINUTE: true,
      PORT: true,
      PUBLIC_BASE_URL: true,
    })
    .parse(Object.fromEntries(Object.entries(process.env).filter(([k, v]) => /^(ASSISTANT_|PORT$|PUBLIC_BASE_URL$)/.test(k) && v)));
  const config = { ...env, PUBLIC_BASE_URL: (env.PUBLIC_BASE_URL ?? `http://localhost:${env.PORT}`).replace(/\/+$/, ''), REDIS_KEY_PREFIX: '' };
  return new AssistantService({ orm, redis: null, config, log: { warn: () => undefined } });
});
/** The admin CLI acts as an administrator (recorded as "cli" in the audit log). */
const cliAdmin: AuthUser = { id: 0, username: 'cli', email: null, isAdmin: true, permissions: [] };

/** `assistant:*`: the organization assistant connector's setups, delegations and audit log. */
export function registerAssistantCommands(): void {
  program
    .command('assistant:setup:save <slug>')
    .description(
      'create or update an assistant tenant setup (the client secret comes from ASSISTANT_CLIENT_SECRET or --secret-file; needs ASSISTANT_SECRET_KEY)',
    )
    .requiredOption('--client-id <guid>', 'application (client) id of the app registration')
    .option('--name <text>', 'display name (default: the slug)')
    .addOption(new Option('--client-secret <secret>', 'client secret (prefer the environment variable)').env('ASSISTANT_CLIENT_SECRET'))
    .option('--secret-file <file>', 'file holding the client secret')
    .option('--redirect-uri <url>', 'redirect URI (default PUBLIC_BASE_URL/admin/assistant/callback)')
    .option('--graph-url <url>', 'graph API base URL', 'https://graph.microsoft.com')
    .option('--authority-host <url>', 'identity provider host', 'https://login.microsoftonline.com')
    .option('--scopes <scopes...>', 'delegated scopes (default: the required list)')
    .option('--time-zone <iana>', 'time zone sent to the assistant', 'UTC')
    .action(
      runAssistant(
        async (
          svc,
          slug: string,
          o: {
            clientId: string;
            name?: string;
            clientSecret?: string;
            secretFile?: string;
            redirectUri?: string;
            graphUrl: string;
            authorityHost: string;
            scopes?: string[];
            timeZone: string;
          },
        ) => {
          const { DEFAULT_SCOPES } = await import('../assistant/validation.js');
          const existing = (await svc.repo.setupBySlug(slug)) !== null;
          const secret = o.secretFile ? readFileSync(o.secretFile, 'utf8').trim() : o.clientSecret;
          const saved = await svc.saveSetup(
            {
              slug,
              display_name: o.name ?? slug,
              client_id: o.clientId,
              credential_kind: 'secret',
              client_secret: secret,
              redirect_uri: o.redirectUri ?? svc.defaultRedirectUri,
              graph_url: o.graphUrl,
              authority_host: o.authorityHost,
              scopes: o.scopes ?? [...DEFAULT_SCOPES],
              time_zone: o.timeZone,
            },
            cliAdmin,
            existing ? slug : undefined,
          );
          return { json: { setup: saved }, text: [`setup ${saved.slug} ${existing ? 'updated' : 'created'} (secret stored encrypted)`] };
        },
      ),
    );

  program
    .command('assistant:setup:list')
    .description('list assistant tenant setups and their delegates (credentials are never shown)')
    .action(
      runAssistant(async (svc) => {
        const setups = await svc.setupsFor(cliAdmin);
        return {
          json: { setups },
          text: table(
            ['SLUG', 'CLIENT ID', 'AUTHORITY', 'GRAPH', 'DELEGATES'],
            setups.map((s) => [s.slug, s.client_id, s.authority_host, s.graph_url, s.delegates.map((d) => d.username).join(',')]),
            'no setups',
          ),
        };
      }),
    );

  program
    .command('assistant:delegate <slug> <username>')
    .description('delegate an assistant setup to a user (--remove takes it back)')
    .option('--remove', 'remove the delegation')
    .action(
      runAssistant(async (svc, slug: string, username: string, o: { remove?: boolean }) => {
        await svc.delegate(slug, username, cliAdmin, o.remove === true);
        return { json: { slug, username, delegated: !o.remove }, text: [`${slug} ${o.remove ? 'no longer delegated to' : 'delegated to'} ${username}`] };
      }),
    );

  program
    .command('assistant:audit')
    .description('read the assistant audit log, newest first (never holds tokens, codes, state or secrets)')
    .option('--limit <n>', 'rows', positiveInt, 50)
    .option('--action <action>', 'only this action (connect, refresh, validation, request, prompt_test…)')
    .option('--user <username>', 'only this user')
    .action(
      runAssistant(async (svc, o: { limit: number; action?: string; user?: string }) => {
        const user = o.user ? await svc.repo.userByName(o.user) : undefined;
        if (o.user && !user) fail('not_found', `no user named "${o.user}"`);
        const entries = await svc.audit.list({ limit: o.limit, action: o.action, userId: user?.id });
        return {
          json: { entries },
          text: table(
            ['ID', 'AT', 'ACTION', 'RESULT', 'USER', 'SETUP', 'TENANT', 'CODE', 'REQUEST'],
            entries.map((e) => [
              String(e.id),
              e.at,
              e.action,
              e.result,
              e.username ?? '',
              e.setup_slug ?? '',
              e.tenant_id ?? '',
              e.error_code ?? '',
              e.request_id ?? '',
            ]),
            'no entries',
          ),
        };
      }),
    );
}
