import { html, plural, type SafeHtml } from '../../http/html.js';
import type { NickProfile } from '../alias-service.js';
import type { ChannelRow, LogRow, LogSearch, NetworkRow } from '../archive-service.js';
import type { ActivityCount, DayNeighbours, NetworkSummary, ReaderChannel } from './reader-repository.js';
import { utcFromParts } from '../time-zone.js';
import { highlighter, markedText, messageHtml, nickClass } from './render.js';
import type { SearchForm } from './pages.js';

const enc = encodeURIComponent;
export const networkUrl = (network: string) => `/irc/net/${enc(network)}`;
export const channelUrl = (network: string, channel: string, year?: number) =>
  `${networkUrl(network)}/${enc(channel)}${year ? `?year=${String(year).padStart(4, '0')}` : ''}`;
/** A day's page; `at` names a line whose page the server finds (links from outside the day), `line` the anchor. */
export function dayUrl(network: string, channel: string, day: string, opts: { all?: boolean; page?: number; line?: number; at?: number } = {}): string {
  const qs = new URLSearchParams();
  if (opts.all) qs.set('all', '1');
  if (opts.page && opts.page > 1) qs.set('page', String(opts.page));
  if (opts.at) qs.set('at', String(opts.at));
  const q = qs.toString();
  return `${networkUrl(network)}/${enc(channel)}/${day}${q ? `?${q}` : ''}${opts.line ? `#L${opts.line}` : ''}`;
}
export const nickUrl = (nick: string, network?: string) => `/irc/nick/${enc(nick)}${network ? `?network=${enc(network)}` : ''}`;

const MONTH_NAMES = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const num = (n: number) => n.toLocaleString('en');
const PRESENCE = new Set(['JOIN', 'PART', 'QUIT']);

function crumbs(parts: Array<[string, string | null]>): SafeHtml {
  return html`<nav class="crumbs" aria-label="Breadcrumb"><a href="/irc">Chat logs</a>${parts.map(([label, href]) =>
    href ? html` › <a href="${href}">${label}</a>` : html` › <span aria-current="page">${label}</span>`,
  )}</nav>`;
}

function searchBox(opts: { networkId?: number; channelId?: number; label: string }): SafeHtml {
  return html`<form class="irc-search-box" method="get" action="/irc/search" role="search">
    ${opts.networkId ? html`<input type="hidden" name="network_id" value="${opts.networkId}">` : ''}${opts.channelId ? html`<input type="hidden" name="channel_id" value="${opts.channelId}">` : ''}
    <label for="q">${opts.label}</label><input id="q" name="q" type="search" maxlength="500" required> <button type="submit">Search</button></form>`;
}

export function networksView(summaries: NetworkSummary[]): SafeHtml {
  return html`<div class="card irc-reader"><h1>Chat logs</h1>
    <p class="muted">The public chat-log archive: pick a network, a channel and a day, or search every log. Times are UTC. The same data is served as JSON by the <a href="/docs">chat-log API</a> (/irc/api).</p>
    ${searchBox({ label: 'Search all logs' })}
    ${
      summaries.length
        ? html`<div class="table-wrap"><table id="irc-networks"><thead><tr><th>Network</th><th class="num">Channels</th><th class="num">Events</th><th>Last activity</th></tr></thead><tbody>${summaries.map(
            (n) =>
              html`<tr><td><a href="${networkUrl(n.name)}">${n.name}</a></td><td class="num">${num(n.channels)}</td><td class="num">${num(n.events)}</td><td>${n.last_date ?? ''}</td></tr>`,
          )}</tbody></table></div>`
        : html`<p id="no-networks">The archive is empty.</p>`
    }</div>`;
}

export function channelsView(network: NetworkRow, channels: ChannelRow[]): SafeHtml {
  return html`${crumbs([[network.name, null]])}<div class="card irc-reader"><h1>${network.name}</h1>
    ${searchBox({ networkId: network.id, label: `Search ${network.name}` })}
    ${
      channels.length
        ? html`<div class="table-wrap"><table id="irc-channels"><thead><tr><th>Channel</th><th class="num">Events</th><th>First</th><th>Last</th></tr></thead><tbody>${channels.map(
            (c) =>
              html`<tr><td><a href="${channelUrl(network.name, c.name)}">${c.name}</a></td><td class="num">${num(c.event_count)}</td><td>${c.first_date ?? ''}</td><td>${c.last_date ?? ''}</td></tr>`,
          )}</tbody></table></div>`
        : html`<p id="no-channels">No channel of ${network.name} has logs yet.</p>`
    }</div>`;
}

/** Activity level of a day for its colour: by messages (0: only joins, parts and the like). */
const level = (d: ActivityCount) => (d.messages === 0 ? 0 : d.messages < 10 ? 1 : d.messages < 100 ? 2 : d.messages < 1000 ? 3 : 4);

export function calendarView(v: {
  network: NetworkRow;
  channel: ReaderChannel;
  year: number;
  /** The years that have rows, in order: only those are linked (a stray row in 9999 must not list 8,000 empty years). */
  years: number[];
  days: ActivityCount[];
}): SafeHtml {
  const { network, channel, year, years } = v;
  const byDay = new Map(v.days.map((d) => [d.key, d]));
  const months = Array.from({ length: 12 }, (_, m) => m).filter((m) => v.days.some((d) => Number(d.key.slice(5, 7)) === m + 1));
  const month = (m: number) => {
    const first = new Date(utcFromParts(year, m, 1, 0, 0, 0));
    const length = new Date(utcFromParts(year, m + 1, 0, 0, 0, 0)).getUTCDate();
    const lead = (first.getUTCDay() + 6) % 7; // Monday first
    const cells: SafeHtml[] = Array.from({ length: lead }, () => html`<td></td>`);
    let messages = 0;
    for (let d = 1; d <= length; d += 1) {
      const key = `${String(year).padStart(4, '0')}-${String(m + 1).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
      const a = byDay.get(key);
      if (a) messages += a.messages;
      cells.push(
        a
          ? html`<td class="act lvl-${level(a)}"><a href="${dayUrl(network.name, channel.name, key)}" title="${plural(a.messages, 'message')}, ${plural(a.events, 'event')}" data-day="${key}">${d}<span class="count">${num(a.messages)}</span></a></td>`
          : html`<td class="idle">${d}</td>`,
      );
    }
    while (cells.length % 7) cells.push(html`<td></td>`);
    const weeks = Array.from({ length: cells.length / 7 }, (_, w) => html`<tr>${cells.slice(w * 7, w * 7 + 7)}</tr>`);
    return html`<section class="month" id="m${String(m + 1).padStart(2, '0')}"><h2>${MONTH_NAMES[m]} ${year} <span class="muted">${plural(messages, 'message')}</span></h2>
      <table class="cal"><thead><tr><th>Mo</th><th>Tu</th><th>We</th><th>Th</th><th>Fr</th><th>Sa</th><th>Su</th></tr></thead><tbody>${weeks}</tbody></table></section>`;
  };
  return html`${crumbs([
    [network.name, networkUrl(network.name)],
    [channel.name, null],
  ])}<div class="card irc-reader"><h1>${channel.name} <span class="muted">on ${network.name}</span></h1>
    <p class="muted">${plural(channel.event_count, 'event')}${channel.first_date ? html`, ${channel.first_date.slice(0, 10)} to ${(channel.last_date ?? '').slice(0, 10)}` : ''} (UTC). Days with logs are links; the number is the day’s messages.</p>
    ${searchBox({ networkId: network.id, channelId: channel.id, label: `Search ${channel.name}` })}
    ${
      years.length > 1
        ? html`<nav class="years" aria-label="Years">${years.map((y) =>
            y === year ? html`<strong aria-current="page">${y}</strong> ` : html`<a href="${channelUrl(network.name, channel.name, y)}">${y}</a> `,
          )}</nav>`
        : ''
    }
    ${months.length ? html`<div class="calendar">${months.map(month)}</div>` : html`<p id="no-days">No logs in ${year}.</p>`}</div>`;
}

const time = (stamp: string) => stamp.slice(11, 19);

function nickLink(nick: string | null, network: string, mark: RegExp | null = null): SafeHtml {
  if (!nick) return html``;
  return html`<a class="nick ${nickClass(nick)}" href="${nickUrl(nick, network)}">${markedText(nick, mark)}</a>`;
}

/** What a row says, in the words of IRC clients. */
function lineBody(r: LogRow, network: string, mark: RegExp | null): { who: SafeHtml; text: SafeHtml } {
  const nick = nickLink(r.nick, network, mark);
  const msg = messageHtml(r.message_text, mark);
  const reason = r.message_text ? html` <span class="reason">(${msg})</span>` : '';
  const nicks = (list: string[] | undefined) => (list ?? []).map((n, i) => html`${i ? ', ' : ''}${nickLink(n, network)}`);
  switch (r.event_type) {
    case 'PRIVMSG':
      return { who: nick, text: msg };
    case 'ACTION':
      return { who: html`<span class="sym">*</span>`, text: html`${nick} ${msg}` };
    case 'NOTICE':
      return { who: html`-${nick}-`, text: msg };
    case 'JOIN':
      return { who: html`<span class="sym">→</span>`, text: html`${nick} joined` };
    case 'PART':
      return { who: html`<span class="sym">←</span>`, text: html`${nick} left${reason}` };
    case 'QUIT':
      return { who: html`<span class="sym">←</span>`, text: html`${nick} quit${reason}` };
    case 'NICK':
      return { who: html`<span class="sym">•</span>`, text: html`${nick} is now known as ${nickLink(r.to_nick, network, mark)}` };
    case 'KICK':
      return { who: html`<span class="sym">•</span>`, text: html`${nick} kicked ${nickLink(r.to_nick, network, mark)}${reason}` };
    case 'MODE':
      return { who: html`<span class="sym">•</span>`, text: html`${nick} sets mode <span class="mono">${msg}</span>` };
    case 'TOPIC':
      return { who: html`<span class="sym">•</span>`, text: html`${nick} changed the topic to: ${msg}` };
    case 'NETSPLIT':
    case 'NETMERGE': {
      const split = r.event_type === 'NETSPLIT';
      const n = r.netsplit_count ?? 1;
      const until = r.netsplit_last_at && r.netsplit_last_at !== r.occurred_at ? ` until ${time(r.netsplit_last_at)}` : '';
      return {
        who: html`<span class="sym">⇹</span>`,
        text: html`<details class="netsplit"><summary>${split ? 'Netsplit' : 'Netsplit over'}${split && r.message_text ? html` <span class="reason">(${r.message_text})</span>` : ''}: ${plural(n, 'nick')} ${split ? 'quit' : 'rejoined'}${until}</summary>${nicks(r.netsplit_nicks ?? (r.nick ? [r.nick] : []))}${(r.netsplit_nicks?.length ?? 1) < n ? html` and ${num(n - (r.netsplit_nicks?.length ?? 1))} more` : ''}</details>`,
      };
    }
    default:
      return { who: nick, text: msg };
  }
}

function logLine(r: LogRow, network: string, opts: { href: string; mark?: RegExp | null; channel?: SafeHtml }): SafeHtml {
  const { who, text } = lineBody(r, network, opts.mark ?? null);
  return html`<tr id="L${r.id}" class="ev ev-${r.event_type.toLowerCase()}"><td class="time"><a href="${opts.href}" title="${r.occurred_at} UTC">${opts.channel ? r.occurred_at.slice(0, 16) : time(r.occurred_at)}</a></td>${opts.channel ? html`<td class="chan">${opts.channel}</td>` : ''}<td class="who">${who}</td><td class="msg">${text}</td></tr>`;
}

export function dayView(v: {
  network: NetworkRow;
  channel: ReaderChannel;
  day: string;
  all: boolean;
  page: number;
  pages: number;
  rows: LogRow[];
  around: DayNeighbours;
}): SafeHtml {
  const { network, channel, day, all } = v;
  const url = (o: { day?: string; all?: boolean; page?: number; line?: number; at?: number }) =>
    dayUrl(network.name, channel.name, o.day ?? day, { all: o.all ?? all, ...o });
  const dayNav = html`<nav class="day-nav" aria-label="Days">${v.around.prev ? html`<a rel="prev" href="${url({ day: v.around.prev, page: 1 })}">← ${v.around.prev}</a>` : html`<span></span>`}
    <a href="${channelUrl(network.name, channel.name, Number(day.slice(0, 4)))}#m${day.slice(5, 7)}">Calendar</a>
    ${v.around.next ? html`<a rel="next" href="${url({ day: v.around.next, page: 1 })}">${v.around.next} →</a>` : html`<span></span>`}</nav>`;
  const paging =
    v.pages > 1
      ? html`<nav class="paging" aria-label="Pages of the day">${Array.from({ length: v.pages }, (_, i) => i + 1).map((p) =>
          p === v.page ? html`<strong aria-current="page">${p}</strong> ` : html`<a href="${url({ page: p })}">${p}</a> `,
        )}</nav>`
      : '';
  return html`${crumbs([
    [network.name, networkUrl(network.name)],
    [channel.name, channelUrl(network.name, channel.name, Number(day.slice(0, 4)))],
    [day, null],
  ])}<div class="card irc-reader"><h1>${channel.name} <span class="muted">${day}</span></h1>
    ${dayNav}
    <p class="toggles">${
      all
        ? html`<a id="presence-toggle" href="${url({ all: false, page: 1 })}">Hide joins, parts and quits</a>`
        : html`<a id="presence-toggle" href="${url({ all: true, page: 1 })}">Show joins, parts and quits</a>`
    } <span class="muted">Times are UTC; each time links to its line.</span></p>
    ${paging}
    ${
      v.rows.length
        ? html`<div class="table-wrap"><table class="irc-log" id="irc-log"><tbody>${v.rows.map((r) =>
            logLine(r, network.name, { href: PRESENCE.has(r.event_type) && !all ? url({ all: true, at: r.id, line: r.id }) : `#L${r.id}` }),
          )}</tbody></table></div>`
        : html`<p id="only-presence" class="muted">Only joins, parts and quits on this day.</p>`
    }
    ${paging}${dayNav}</div>`;
}

export function searchView(v: {
  form: SearchForm;
  networks: NetworkRow[];
  result: { total: number; results: LogRow[]; search: LogSearch } | null;
  error: string | null;
  asked: boolean;
}): SafeHtml {
  const { form } = v;
  const names = new Map(v.networks.map((n) => [n.id, n.name]));
  const selected = (id: number) => (form.network_id === String(id) ? html` selected` : '');
  const formHtml = html`<form class="irc-search" method="get" action="/irc/search" role="search">
    <div class="grid2"><div><label for="q">Words</label><input id="q" name="q" type="search" maxlength="500" value="${form.q ?? ''}">
      <p class="hint">All words must match; <code>-word</code> excludes, <code>"a phrase"</code>, <code>prefix*</code>, <code>*substring</code>.</p></div>
    <div><label for="nick">Nick</label><input id="nick" name="nick" maxlength="64" value="${form.nick ?? ''}"><p class="hint">The person, with every nick they used.</p></div>
    <div><label for="network_id">Network</label><select id="network_id" name="network_id"><option value="">All networks</option>${v.networks.map(
      (n) => html`<option value="${n.id}"${selected(n.id)}>${n.name}</option>`,
    )}</select></div>
    <div><label for="order">Order</label><select id="order" name="order"><option value="asc">Oldest first</option><option value="desc"${form.order === 'desc' ? html` selected` : ''}>Newest first</option></select></div>
    <div><label for="date_from">From (UTC day)</label><input id="date_from" name="date_from" type="date" value="${form.date_from ?? ''}"></div>
    <div><label for="date_to">To (UTC day)</label><input id="date_to" name="date_to" type="date" value="${form.date_to ?? ''}"></div></div>
    ${form.channel_id ? html`<label class="checks"><input type="checkbox" name="channel_id" value="${form.channel_id}" checked> only this channel</label>` : ''}
    <button type="submit">Search</button></form>`;
  let results: SafeHtml | string = '';
  if (v.error) results = html`<p class="error" role="alert" id="search-error">${v.error}</p>`;
  else if (v.result) {
    const { total, results: rows, search } = v.result;
    const mark = highlighter(search.include);
    const pageUrl = (offset: number) => {
      const qs = new URLSearchParams();
      for (const [k, val] of Object.entries(form)) if (val !== undefined && k !== 'offset') qs.set(k, String(val));
      if (offset > 0) qs.set('offset', String(offset));
      return `/irc/search?${qs.toString()}`;
    };
    const from = search.offset + 1;
    const to = search.offset + rows.length;
    const paging = html`<nav class="paging" aria-label="Result pages">${
      search.offset > 0 ? html`<a rel="prev" id="prev-page" href="${pageUrl(Math.max(0, search.offset - search.limit))}">← Newer/earlier results</a> ` : ''
    }${to < total ? html`<a rel="next" id="next-page" href="${pageUrl(search.offset + search.limit)}">More results →</a>` : ''}</nav>`;
    results = rows.length
      ? html`<p id="result-count">${from === 1 && to === total ? plural(total, 'result') : html`Results ${num(from)}–${num(to)} of ${num(total)}`}</p>
        <div class="table-wrap"><table class="irc-log" id="irc-results"><tbody>${rows.map((r) => {
          const network = names.get(r.network_id) ?? '';
          return logLine(r, network, {
            href: dayUrl(network, r.channel_name, r.occurred_at.slice(0, 10), { all: PRESENCE.has(r.event_type), at: r.id, line: r.id }),
            mark,
            channel: html`<a href="${channelUrl(network, r.channel_name)}">${r.channel_name}</a>${v.networks.length > 1 ? html` <span class="muted">${network}</span>` : ''}`,
          });
        })}</tbody></table></div>${paging}`
      : html`<p id="result-count">No results.</p>`;
  }
  return html`${crumbs([['Search', null]])}<div class="card irc-reader"><h1>Search chat logs</h1>${formHtml}</div>
    ${v.asked || v.error ? html`<div class="card irc-reader" id="search-results">${results}</div>` : ''}`;
}

export function nickView(v: {
  profile: NickProfile;
  network: NetworkRow | null;
  months: ActivityCount[];
  recent: LogRow[];
  networkNames: Map<number, string>;
}): SafeHtml {
  const { profile } = v;
  const max = Math.max(1, ...v.months.map((m) => m.messages));
  const last = v.recent[0];
  const net = (r: LogRow) => v.networkNames.get(r.network_id) ?? '';
  return html`${crumbs([[profile.nick, null]])}<div class="card irc-reader" id="nick-profile"><h1><span class="nick ${nickClass(profile.nick)}">${profile.nick}</span>${v.network ? html` <span class="muted">on ${v.network.name}</span>` : ''}</h1>
    <dl class="facts">
      <dt>Also known as</dt><dd id="aliases">${profile.aliases.length ? profile.aliases.map((a, i) => html`${i ? ', ' : ''}<a class="nick ${nickClass(a)}" href="${nickUrl(a, v.network?.name)}">${a}</a>`) : html`<span class="muted">no other nick</span>`}</dd>
      <dt>First seen</dt><dd id="first-seen">${profile.first_seen} UTC</dd>
      <dt>Last seen</dt><dd id="last-seen">${profile.last_seen} UTC</dd>
      <dt>Last message</dt><dd id="last-message">${profile.last_message ? html`${profile.last_message} UTC` : html`<span class="muted">never spoke</span>`}</dd>
      <dt>Messages</dt><dd>${num(profile.message_count)} <span class="muted">of ${plural(profile.event_count, 'event')}</span></dd>
      <dt>Networks</dt><dd>${profile.networks.map((n, i) => html`${i ? ', ' : ''}<a href="${networkUrl(n.name)}">${n.name}</a>`)}</dd>
    </dl>
    <p><a href="/irc/search?nick=${encodeURIComponent(profile.nick)}${v.network ? `&network_id=${v.network.id}` : ''}&order=desc">Every message, newest first</a></p></div>
    ${
      last
        ? html`<div class="card irc-reader" id="recent"><h2>Last messages</h2><div class="table-wrap"><table class="irc-log"><tbody>${v.recent.map((r) =>
            logLine(r, net(r), {
              href: dayUrl(net(r), r.channel_name, r.occurred_at.slice(0, 10), { at: r.id, line: r.id }),
              channel: html`<a href="${channelUrl(net(r), r.channel_name)}">${r.channel_name}</a>`,
            }),
          )}</tbody></table></div></div>`
        : ''
    }
    <div class="card irc-reader" id="activity"><h2>Activity per month</h2>${
      v.months.length
        ? html`<div class="table-wrap"><table class="activity"><thead><tr><th>Month</th><th class="num">Messages</th><th class="num">Events</th><th></th></tr></thead><tbody>${v.months.map(
            (m) =>
              html`<tr data-month="${m.key}"><td>${m.key}</td><td class="num">${num(m.messages)}</td><td class="num">${num(m.events)}</td><td><meter min="0" max="${max}" value="${m.messages}">${num(m.messages)}</meter></td></tr>`,
          )}</tbody></table></div>`
        : html`<p class="muted">No activity.</p>`
    }</div>`;
}
