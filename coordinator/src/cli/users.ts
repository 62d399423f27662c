import { PERMISSIONS, TOKEN_SCOPES } from '@sonar/shared';
import { Option } from 'commander';
import { SPEECH_API_TOKEN_NAME, type AccountService } from '../accounts/account-service.js';
import { generatePassword } from '../accounts/password.js';
import { presentToken, presentUser } from '../accounts/presenters.js';
import type { AuthUser } from '../accounts/types.js';
import { fail } from './errors.js';
import { day, positiveInt, shownOnce, table } from './format.js';
import { program } from './program.js';
import { runAccounts } from './runner.js';

export async function requireUser(svc: AccountService, username: string): Promise<AuthUser> {
  return (await svc.findUser(username)) ?? fail('not_found', `no user named "${username}"`);
}

const describeUser = (u: AuthUser) => `${u.username} (id ${u.id}${u.isAdmin ? ', admin' : ''}) permissions: ${u.permissions.join(', ') || '-'}`;
const passwordOption = () => new Option('--password <password>', 'password to set (generated and printed when omitted)').env('SONAR_NEW_PASSWORD');

/** `user:*`: accounts, administrator rights, permissions. */
export function registerUserCommands(): void {
  program
    .command('user:create <username>')
    .description('create a user (prints a generated password when none is given)')
    .addOption(passwordOption())
    .option('--email <email>', 'e-mail address')
    .option('--admin', 'make the user an administrator')
    .option('--permission <permission...>', `permissions to grant (${PERMISSIONS.join(', ')})`)
    .action(
      runAccounts(async (svc, username: string, o: { password?: string; email?: string; admin?: boolean; permission?: string[] }) => {
        const { user, password } = await svc.createUser({ username, password: o.password, email: o.email, isAdmin: !!o.admin, permissions: o.permission });
        const generated = o.password === undefined;
        return {
          json: { user: presentUser(user), ...(generated ? { password } : {}) },
          text: [`created ${describeUser(user)}`, ...(generated ? shownOnce('password', password) : [])],
        };
      }),
    );

  program
    .command('user:list')
    .description('list all users')
    .action(
      runAccounts(async (svc) => {
        // AuthUser carries no disabled flag; findActiveUser (null when disabled) is the service's way to ask.
        const users = await Promise.all((await svc.listUsers()).map(async (u) => ({ ...presentUser(u), disabled: !(await svc.findActiveUser(u.id)) })));
        return {
          json: { users },
          text: table(
            ['ID', 'USERNAME', 'ADMIN', 'DISABLED', 'EMAIL', 'PERMISSIONS'],
            users.map((u) => [String(u.id), u.username, u.is_admin ? 'yes' : 'no', u.disabled ? 'yes' : 'no', u.email ?? '-', u.permissions.join(',') || '-']),
            'no users',
          ),
        };
      }),
    );

  program
    .command('user:password <username>')
    .description("set a user's password (generates and prints one when none is given); ends their sessions")
    .addOption(passwordOption())
    .action(
      runAccounts(async (svc, username: string, o: { password?: string }) => {
        const password = o.password ?? generatePassword();
        await svc.setPassword(username, password);
        const generated = o.password === undefined;
        return {
          json: { username, ...(generated ? { password } : {}) },
          text: [`password of ${username} changed`, ...(generated ? shownOnce('password', password) : [])],
        };
      }),
    );

  program
    .command('user:admin <username>')
    .description('grant (--on) or remove (--off) administrator rights')
    .addOption(new Option('--on', 'make the user an administrator').conflicts('off'))
    .addOption(new Option('--off', 'remove administrator rights'))
    .action(
      runAccounts(async (svc, username: string, o: { on?: boolean; off?: boolean }) => {
        if (!o.on && !o.off) fail('validation_failed', 'say --on or --off');
        const user = await svc.setAdmin(username, !!o.on);
        return { json: { user: presentUser(user) }, text: [`${user.username} is ${user.isAdmin ? 'now' : 'no longer'} an administrator`] };
      }),
    );

  for (const [name, disabled] of [
    ['user:disable', true],
    ['user:enable', false],
  ] as const) {
    program
      .command(`${name} <username>`)
      .description(disabled ? 'disable a user (ends their sessions; tokens stop working)' : 'enable a disabled user')
      .action(
        runAccounts(async (svc, username: string) => {
          const user = await svc.setDisabled(username, disabled);
          return { json: { user: { ...presentUser(user), disabled } }, text: [`${user.username} ${disabled ? 'disabled' : 'enabled'}`] };
        }),
      );
  }

  for (const [name, grant] of [
    ['user:grant', true],
    ['user:revoke', false],
  ] as const) {
    program
      .command(`${name} <username> <permission...>`)
      .description(grant ? `grant permissions (${PERMISSIONS.join(', ')})` : 'revoke permissions')
      .action(
        runAccounts(async (svc, username: string, permissions: string[]) => {
          const user = await (grant ? svc.grantPermissions(username, permissions) : svc.revokePermissions(username, permissions));
          return { json: { user: presentUser(user) }, text: [describeUser(user)] };
        }),
      );
  }
}

/** `zone:*`: which DNS zones a user may read or write. */
export function registerZoneRightCommands(): void {
  program
    .command('zone:grant <username> <zone>')
    .description('give a user read access to a DNS zone (read and write with --write)')
    .option('--write', 'also allow changes')
    .action(
      runAccounts(async (svc, username: string, zone: string, o: { write?: boolean }) => {
        const rights = await svc.grantZone(username, zone, { read: true, write: !!o.write });
        return { json: { username, ...rights }, text: [`${username}: ${rights.zone} ${rights.can_write ? 'read/write' : 'read-only'}`] };
      }),
    );

  program
    .command('zone:revoke <username> <zone>')
    .description("remove a user's rights on a DNS zone")
    .action(
      runAccounts(async (svc, username: string, zone: string) => {
        if (!(await svc.revokeZone(username, zone))) fail('not_found', `${username} has no rights on zone "${zone}"`);
        return { json: { username, zone }, text: [`${username}: rights on ${zone} removed`] };
      }),
    );

  program
    .command('zone:list <username>')
    .description("list a user's DNS zone rights")
    .action(
      runAccounts(async (svc, username: string) => {
        const user = await requireUser(svc, username);
        const zones = (await svc.zoneRights(user.id)).map((z) => ({ zone: z.zone, can_read: z.canRead, can_write: z.canWrite }));
        return {
          json: { username: user.username, zones },
          text: table(
            ['ZONE', 'ACCESS'],
            zones.map((z) => [z.zone, z.can_write ? 'read/write' : 'read-only']),
            `${user.username} has no zone rights`,
          ),
        };
      }),
    );
}

/** `token:*`: personal access tokens. */
export function registerTokenCommands(): void {
  program
    .command('token:create <username>')
    .description("create a user's personal access token (printed once)")
    .requiredOption('--name <name>', 'label for the token')
    .requiredOption('--scope <scope...>', `scopes (${TOKEN_SCOPES.join(', ')})`)
    .option('--expires-days <days>', 'expire after this many days (default: never)', positiveInt)
    .action(
      runAccounts(async (svc, username: string, o: { name: string; scope: string[]; expiresDays?: number }) => {
        const user = await requireUser(svc, username);
        const { token, record, callbackSecret } = await svc.createPersonalToken(user.id, { name: o.name, scopes: o.scope, expiresInDays: o.expiresDays });
        return {
          json: { secret: token, callback_secret: callbackSecret, token: presentToken(record) },
          text: [`created token ${record.id} for ${user.username}`, ...shownOnce('token', token), ...shownOnce('callback signing secret', callbackSecret)],
        };
      }),
    );

  program
    .command('token:speech-api <username>')
    .description(`generate a user's ${SPEECH_API_TOKEN_NAME} token for the speech token API (scope speech.api; printed once), revoking the previous one`)
    .option('--expires-days <days>', 'expire after this many days (default: never)', positiveInt)
    .action(
      runAccounts(async (svc, username: string, o: { expiresDays?: number }) => {
        const user = await requireUser(svc, username);
        const { token, record, callbackSecret, revokedTokenIds } = await svc.generateSpeechApiToken(user.id, { expiresInDays: o.expiresDays });
        return {
          json: { secret: token, callback_secret: callbackSecret, token: presentToken(record), revoked_token_ids: revokedTokenIds },
          text: [
            `created token ${record.id} (${record.name}, scope speech.api) for ${user.username}`,
            ...(revokedTokenIds.length ? [`revoked the previous ${record.name} token(s): ${revokedTokenIds.join(', ')}`] : []),
            ...shownOnce('token', token),
            ...shownOnce('callback signing secret', callbackSecret),
          ],
        };
      }),
    );

  program
    .command('token:list <username>')
    .description("list a user's personal access tokens")
    .action(
      runAccounts(async (svc, username: string) => {
        const user = await requireUser(svc, username);
        const tokens = (await svc.listPersonalTokens(user.id)).map(presentToken);
        return {
          json: { username: user.username, tokens },
          text: table(
            ['ID', 'NAME', 'PREFIX', 'SCOPES', 'EXPIRES', 'LAST USED', 'REVOKED'],
            tokens.map((t) => [String(t.id), t.name, t.prefix, t.scopes.join(','), day(t.expires_at), day(t.last_used_at), day(t.revoked_at)]),
            `${user.username} has no tokens`,
          ),
        };
      }),
    );

  program
    .command('token:revoke')
    .description('revoke a personal access token by id')
    .argument('<tokenId>', 'id shown by token:list', positiveInt)
    .action(
      runAccounts(async (svc, tokenId: number) => {
        if (!(await svc.revokePersonalToken(tokenId))) fail('not_found', `no token with id ${tokenId}`);
        return { json: { id: tokenId }, text: [`token ${tokenId} revoked`] };
      }),
    );
}
