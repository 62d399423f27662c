/** The live logger's configuration file (IRC_LOGGER_CONFIG), validated with messages that name the field. */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../../config.js';
import { IRC_SOURCES } from '../event-store.js';

// eslint-disable-next-line no-control-regex -- a channel name may not contain ^G (BEL), as RFC 2812 says
const channelName = z.string().regex(/^[#&+!][^\s,\x07]{1,199}$/, 'must be a channel name such as "#name" (no spaces or commas)');
const nickName = z
  .string()
  .regex(/^[A-Za-z[\]\\`_^{|}][A-Za-z0-9[\]\\`_^{|}-]{0,31}$/, 'must be an IRC nick (letters, digits, [ ] \\ ` _ ^ { | } -; not starting with a digit or -)');

export const ircLoggerNetworkSchema = z
  .strictObject({
    /** Network name in the archive (irc_networks.name). */
    name: z.string().trim().min(1).max(255),
    source: z.enum(IRC_SOURCES).default('production'),
    host: z.string().trim().min(1).max(255),
    port: z.number().int().min(1).max(65535).default(6697),
    tls: z.boolean().default(true),
    /** Check the server's TLS certificate (turn off only for self-signed test servers). */
    tlsVerify: z.boolean().default(true),
    nick: nickName,
    /** Ident; the nick when omitted. */
    username: z
      .string()
      .regex(/^[^\s@:]{1,32}$/, 'must be 1–32 characters without spaces, "@" or ":"')
      .optional(),
    realname: z.string().min(1).max(200).default('sonar archive'),
    /** Server password (PASS). */
    password: z.string().min(1).nullable().default(null),
    sasl: z
      .strictObject({ account: z.string().min(1), password: z.string().min(1) })
      .nullable()
      .default(null),
    channels: z.array(channelName).max(500).default([]),
    /** Upper bound of the reconnect backoff. */
    reconnectMaxWaitMs: z.number().int().min(1000).max(3_600_000).default(300_000),
  })
  .superRefine((n, ctx) => {
    const seen = new Set<string>();
    n.channels.forEach((c, i) => {
      const key = c.toLowerCase();
      if (seen.has(key)) ctx.addIssue({ code: 'custom', path: ['channels', i], message: `"${c}" is listed twice` });
      seen.add(key);
    });
  });

export const ircLoggerConfigSchema = z
  .strictObject({
    networks: z.array(ircLoggerNetworkSchema).min(1, 'must list at least one network'),
    /** QUIT message when the logger stops. */
    quitMessage: z.string().max(300).default('sonar archive logger stopping'),
  })
  .superRefine((c, ctx) => {
    const seen = new Set<string>();
    c.networks.forEach((n, i) => {
      const key = n.name.toLowerCase();
      if (seen.has(key)) ctx.addIssue({ code: 'custom', path: ['networks', i, 'name'], message: `network "${n.name}" is configured twice` });
      seen.add(key);
    });
  });

export type IrcLoggerConfig = z.infer<typeof ircLoggerConfigSchema>;
export type IrcLoggerNetworkConfig = z.infer<typeof ircLoggerNetworkSchema>;
/** What a config file may leave out (defaults apply). */
export type IrcLoggerConfigInput = z.input<typeof ircLoggerConfigSchema>;

const issuePath = (path: PropertyKey[]) =>
  path.reduce<string>((s, p) => (typeof p === 'number' ? `${s}[${p}]` : s ? `${s}.${String(p)}` : String(p)), '') || '(top level)';

/** Validates a parsed config; throws ConfigError naming each bad field (`networks[0].port: …`). */
export function parseIrcLoggerConfig(value: unknown, origin = 'IRC_LOGGER_CONFIG'): IrcLoggerConfig {
  const parsed = ircLoggerConfigSchema.safeParse(value);
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => `${origin}: ${issuePath(i.path)}: ${i.message}`));
  return parsed.data;
}

/** Reads and validates the JSON file IRC_LOGGER_CONFIG names; throws ConfigError. */
export function loadIrcLoggerConfig(file: string): IrcLoggerConfig {
  const origin = `IRC_LOGGER_CONFIG (${file})`;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`${origin}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`]);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError([`${origin}: not valid JSON (${(err as Error).message})`]);
  }
  return parseIrcLoggerConfig(json, origin);
}
