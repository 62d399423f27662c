import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * One sample file per chat-log format beside ZNC, with every event kind (see irc-formats.test.ts
 * for where each format's wording comes from): the parser tests read them, the import test
 * (irc-formats-import.test.ts) stores them in PostgreSQL.
 */

export const lines = (...ls: string[]) => `${ls.join('\n')}\n`;

export const IRSSI = lines(
  '--- Log opened Mon Jan 02 10:00:00 2017',
  '10:00 -!- alice [~alice@host.example] has joined #irssi',
  '10:01 <@alice> hello bob',
  '10:02 < bob> alice: hi',
  '10:03  * bob waves',
  '10:04 -!- mode/#irssi [+o bob] by alice',
  '10:05 -!- alice changed the topic of #irssi to: welcome',
  '10:06 -!- bob is now known as bobby',
  '10:07 -!- carol was kicked from #irssi by alice [spam]',
  '10:08 -!- dave [~d@h.example] has left #irssi [bye]',
  '10:09 -!- erin [~e@h.example] has quit [Quit: leaving]',
  '10:10 -alice:#irssi- notice text',
  '10:11 -!- Irssi: Join to #irssi was synced in 1 secs',
  '23:59 <bobby> late',
  '--- Day changed Tue Jan 03 2017',
  '00:01 <bobby> early',
  '--- Log closed Tue Jan 03 00:02:00 2017',
);

export const WEECHAT = lines(
  '2017-01-02 11:00:00.000001Z\t****  Beginning of log  ****',
  '2017-01-02 11:00:01.5Z\t-->\talice (~alice@host.example) has joined #weechat',
  '2017-01-02 11:00:02.123456Z\t@alice\thello',
  '2017-01-02 11:00:03.123456Z\t *\talice waves',
  '2017-01-02 11:00:04.123456Z\t--\tMode #weechat [+v bob] by alice',
  '2017-01-02 11:00:05.123456Z\t--\talice has changed topic for #weechat from "old" to "new topic"',
  '2017-01-02 11:00:06.123456Z\t--\tbob is now known as bobby',
  '2017-01-02 11:00:07.123456Z\t<--\talice has kicked carol (flood)',
  '2017-01-02 11:00:08.123456Z\t<--\tdave (~d@h.example) has left #weechat (bye)',
  '2017-01-02 11:00:09.123456Z\t<--\terin (~e@h.example) has quit (*.net *.split)',
  '2017-01-02 11:00:10.123456Z\t--\tNotice(alice) -> #weechat: hey all',
);

export const LIMNORIA = lines(
  '2017-01-02T12:00:00  *** alice <alice!~alice@host.example> has joined #limnoria',
  '2017-01-02T12:00:01  <alice> hello',
  '2017-01-02T12:00:02  * alice waves',
  '2017-01-02T12:00:03  -alice- notice',
  '2017-01-02T12:00:04  *** alice sets mode: +o bob',
  '2017-01-02T12:00:05  *** alice changes topic to "new topic"',
  '2017-01-02T12:00:06  *** bob is now known as bobby',
  '2017-01-02T12:00:07  *** carol was kicked by alice (spam)',
  '2017-01-02T12:00:08  *** dave <dave!~d@h.example> has left #limnoria (bye)',
  '2017-01-02T12:00:09  *** erin <erin!~e@h.example> has quit IRC (Quit: leaving)',
  '2017-01-02T12:00:10  *** alice <alice!~alice@host.example> invited frank to #limnoria',
);

export const HEXCHAT = lines(
  '**** BEGIN LOGGING AT Mon Jan  2 12:00:00 2017',
  '',
  'Jan 02 12:00:00 -->\talice (~alice@host.example) has joined #hexchat',
  'Jan 02 12:00:01 <alice>\thello',
  'Jan 02 12:00:02 *\talice waves',
  'Jan 02 12:00:03 -alice/#hexchat-\tnotice',
  'Jan 02 12:00:04 ---\talice gives channel operator status to bob',
  'Jan 02 12:00:05 ---\talice has changed the topic to: new topic',
  'Jan 02 12:00:06 ---\tbob is now known as bobby',
  'Jan 02 12:00:07 <--\talice has kicked carol from #hexchat (spam)',
  'Jan 02 12:00:08 <--\tdave (~d@h.example) has left #hexchat (bye)',
  'Jan 02 12:00:09 <--\terin has quit (Quit: leaving)',
  '**** ENDING LOGGING AT Mon Jan  2 13:00:00 2017',
);

export const ENERGYMECH = lines(
  '[12:00:00] *** Joins: alice (~alice@host.example)',
  '[12:00:01] <alice> hello',
  '[12:00:02] * alice waves',
  '[12:00:03] -alice:#energymech- notice',
  '[12:00:04] *** alice sets mode: +o bob',
  '[12:00:05] *** alice changes topic to "new topic"',
  '[12:00:06] *** bob is now known as bobby',
  '[12:00:07] *** carol was kicked by alice (spam)',
  '[12:00:08] *** Parts: dave (~d@h.example)',
  '[12:00:09] *** Quits: erin (Quit: leaving)',
);

export const FIXTURES = [
  { format: 'irssi', rel: 'irclogs/libera/#irssi.log', text: IRSSI, events: 13, lines: 17 },
  { format: 'weechat', rel: 'weechat/irc.libera.#weechat.weechatlog', text: WEECHAT, events: 10, lines: 11 },
  { format: 'limnoria', rel: 'ChannelLogger/libera/#limnoria/#limnoria.2017-01-02.log', text: LIMNORIA, events: 10, lines: 11 },
  { format: 'hexchat', rel: 'hexchat/libera-#hexchat.log', text: HEXCHAT, events: 10, lines: 12 },
  { format: 'energymech', rel: 'mech/#energymech_20170102.log', text: ENERGYMECH, events: 10, lines: 10 },
] as const;

/** Writes every sample under `dir/logs/<rel>`. */
export function writeFormatFixtures(dir: string): void {
  for (const f of FIXTURES) {
    const file = path.join(dir, 'logs', f.rel);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, f.text);
  }
}
