import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IrcCorrectionService } from '../../coordinator/src/irc/correction-service.js';
import { IrcImportService } from '../../coordinator/src/irc/import-service.js';
import { DAY_PAGE } from '../../coordinator/src/irc/reader/pages.js';
import { nickClass } from '../../coordinator/src/irc/reader/render.js';
import { createTestApp, testEnv, type TestApp } from '../support/harness.js';
import { pairCounts } from '../support/irc-pairs.js';

/**
 * The public chat-log reader (/irc) over app.inject(): every page, the escaping of hostile nicks,
 * messages and links, the 404 pages, paging, the joins/parts toggle, the search page's highlights,
 * the nick page, the production-only rule and the shared rate limit.
 */
const LAB_DAY1 = [
  '[10:00:00] *** Joins: alice (~a@host)',
  '[10:00:05] <alice> hello world from the lab, see https://example.org/docs?a=1&b=2 and javascript:alert(1)',
  '[10:00:10] <bob> alice: <script>alert("xss")</script> & <img src=x onerror=alert(1)>',
  '[10:00:20] * alice waves at bob',
  '[10:01:00] *** alice is now known as alice_away',
  '[10:02:00] <alice_away> still here, testing phrase search',
  '[10:03:00] *** Quits: carol (~c@h) (*.net *.split)',
  '[10:03:01] *** Quits: dave (~d@h) (*.net *.split)',
  '[10:03:02] *** Quits: erin (~e@h) (*.net *.split)',
  '[10:04:00] *** Parts: frank (~f@h) (bye now)',
  '[10:05:00] <"\'<img> a hostile nick says hi',
  '[10:06:00] <rysiek|pl> link: https://example.com/a_(b)?q="x"<y> done',
  "[10:07:00] *** bob changes topic to 'Lab <b>topic</b>'",
].join('\n');
const LAB_DAY2 = ['[09:00:00] <alice_away> good morning world', '[09:30:00] <bob> the release notes are out'].join('\n');
const LAB_2023 = ['[12:00:00] <bob> last year in the lab'].join('\n');
/** 120 messages for paging. */
const BUSY = Array.from(
  { length: 120 },
  (_, i) => `[11:${String(Math.floor(i / 60)).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}] <pager> pagingword number ${i + 1}`,
).join('\n');

/** More lines than one page of a day (DAY_PAGE). */
const FLOOD = Array.from(
  { length: DAY_PAGE + 5 },
  (_, i) =>
    `[${String(Math.floor(i / 3600)).padStart(2, '0')}:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}] <flooder> flood ${i + 1}`,
).join('\n');

let t: TestApp;
let dir: string;

const get = async (url: string, headers: Record<string, string> = {}) => {
  const res = await t.app.inject({ method: 'GET', url, headers: { accept: 'text/html', ...headers } });
  return { status: res.statusCode, body: res.body, headers: res.headers };
};
const page = async (url: string) => {
  const r = await get(url);
  expect(r.status, `${url}: ${r.body.slice(0, 500)}`).toBe(200);
  expect(r.headers['content-type']).toMatch(/^text\/html/);
  return r.body;
};
/** The <main> of a page (the layout around it is the console's). */
const main = (body: string) => body.slice(body.indexOf('<main>'), body.indexOf('</main>'));
const LAB = '/irc/net/testnet/%23lab';

beforeAll(async () => {
  t = await createTestApp({ env: { IRC_API_RATE_LIMIT_MAX: '100000' } });
  dir = mkdtempSync(path.join(os.tmpdir(), 'irc-reader-'));
  mkdirSync(path.join(dir, 'lab'));
  writeFileSync(path.join(dir, 'lab', '#lab_20240310.log'), LAB_DAY1);
  writeFileSync(path.join(dir, 'lab', '#lab_20240311.log'), LAB_DAY2);
  writeFileSync(path.join(dir, 'lab', '#lab_20231224.log'), LAB_2023);
  writeFileSync(path.join(dir, 'lab', '#busy_20240401.log'), BUSY);
  writeFileSync(path.join(dir, 'lab', '#flood_20240402.log'), FLOOD);
  writeFileSync(path.join(dir, 'secret.log'), '[12:00:00] <tester> sandbox only words\n');
  const importer = new IrcImportService(t.orm);
  await importer.importPaths([path.join(dir, 'lab')], { network: 'testnet', source: 'production' });
  await importer.importPaths([path.join(dir, 'secret.log')], { network: 'sandboxnet', source: 'sandbox', channel: '#hidden', date: '2024-03-10' });
}, 120_000);
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('browsing', () => {
  it('lists the production networks at /irc, to anyone, without scripts; the sandbox archive stays out', async () => {
    const r = await get('/irc');
    expect(r.status).toBe(200);
    expect(r.headers['content-security-policy']).toContain("script-src 'self' 'nonce-");
    const body = main(r.body);
    expect(body).toContain('href="/irc/net/testnet"');
    expect(body).toContain('action="/irc/search"');
    expect(body).not.toContain('sandboxnet');
    expect(r.body).not.toContain('<script');
    expect((await get('/irc/net/sandboxnet')).status).toBe(404);
  });

  it('lists the channels of a network with links to their calendars', async () => {
    const body = main(await page('/irc/net/testnet'));
    expect(body).toContain(`href="${LAB}"`);
    expect(body).toContain('href="/irc/net/testnet/%23busy"');
    expect(body).toMatch(/#lab<\/a><\/td><td class="num">16<\/td>/);
  });

  it('shows a calendar of the days with logs, per month with counts, for the last year by default, with the other years linked', async () => {
    const body = main(await page(LAB));
    expect(body).toContain('March 2024');
    expect(body).not.toContain('December 2023');
    // 10 March: 6 messages (the action counts, the topic does not) of 13 rows, 11 March: 2.
    expect(body).toContain('title="6 messages, 13 events" data-day="2024-03-10">10<span class="count">6</span>');
    expect(body).toMatch(/data-day="2024-03-11">11<span class="count">2<\/span>/);
    expect(body).toContain(`href="${LAB}/2024-03-10"`);
    expect(body).toContain(`href="${LAB}?year=2023"`);
    expect(body).toContain('<td class="idle">12</td>');
    const y2023 = main(await page(`${LAB}?year=2023`));
    expect(y2023).toContain('December 2023');
    expect(y2023).toContain(`href="${LAB}/2023-12-24"`);
    expect(main(await page(`${LAB}?year=2019`))).toContain('No logs in 2019.');
  });

  it('shows a day: presence lines hidden until the toggle, netsplits in one line, permalinks, nick colours as classes', async () => {
    const body = main(await page(`${LAB}/2024-03-10`));
    expect(body).toContain('hello world from the lab');
    expect(body).not.toContain('joined');
    expect(body).not.toContain('bye now');
    expect(body).toContain(`id="presence-toggle" href="${LAB}/2024-03-10?all=1"`);
    // One collapsed line for the three netsplit quits.
    expect(body.match(/class="ev ev-netsplit"/g)).toHaveLength(1);
    expect(body).toMatch(/Netsplit <span class="reason">\(\*\.net \*\.split\)<\/span>: 3 nicks quit/);
    expect(body).toMatch(/carol<\/a>, <a [^>]*>dave<\/a>, <a [^>]*>erin<\/a><\/details>/);
    // Every line has an anchor and links to it.
    const ids = [...body.matchAll(/<tr id="L(\d+)"[^>]*><td class="time"><a href="#L\1"/g)].map((m) => m[1]);
    expect(ids.length).toBe(body.match(/<tr id="L/g)!.length);
    expect(ids.length).toBeGreaterThan(5);
    // Nick colours: a class from a hash of the nick, the same on every line; no style attribute anywhere.
    expect(body).toContain(`class="nick ${nickClass('alice')}"`);
    expect(body).not.toMatch(/style=/);
    expect(body).toContain('<a href="/irc/net/testnet">testnet</a>');
    // Day navigation.
    expect(body).toContain(`rel="prev" href="${LAB}/2023-12-24"`);
    expect(body).toContain(`rel="next" href="${LAB}/2024-03-11"`);

    const all = main(await page(`${LAB}/2024-03-10?all=1`));
    expect(all).toMatch(/alice<\/a> joined/);
    expect(all).toMatch(/frank<\/a> left <span class="reason">\(bye now\)<\/span>/);
    expect(all).toContain(`id="presence-toggle" href="${LAB}/2024-03-10"`);
    expect(all.match(/class="ev ev-netsplit"/g)).toHaveLength(1);
    // The hidden view links presence lines to the view that shows them.
    const joinId = /<tr id="L(\d+)" class="ev ev-join"/.exec(all)![1];
    expect(body).not.toContain(`id="L${joinId}"`);
  });

  it('escapes hostile nicks and messages and links only http(s) URLs, safely', async () => {
    const body = main(await page(`${LAB}/2024-03-10?all=1`));
    expect(body).not.toContain('<script>');
    expect(body).not.toContain('<img');
    expect(body).not.toContain('<b>');
    expect(body).toContain('&lt;script&gt;alert(&quot;xss&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;');
    expect(body).toContain('Lab &lt;b&gt;topic&lt;/b&gt;');
    // The hostile nick: escaped as text, and percent-encoded in its nick page link.
    expect(body).toContain('&quot;&#39;&lt;img</a>');
    expect(body).toContain(`href="/irc/nick/%22&#39;%3Cimg?network=testnet"`);
    expect(body).toContain(
      '<a href="https://example.com/a_(b)?q=%22x%22" rel="nofollow noopener ugc">https://example.com/a_(b)?q=&quot;x&quot;</a>&lt;y&gt; done',
    );
    // http(s) links become anchors with the documented rel; the query's & is escaped in the attribute.
    expect(body).toContain('<a href="https://example.org/docs?a=1&amp;b=2" rel="nofollow noopener ugc">https://example.org/docs?a=1&amp;b=2</a>');
    expect(body).not.toMatch(/href="javascript:/i);
    expect(body).toContain('javascript:alert(1)');
    // Quotes and angle brackets never leave the href.
    const hrefs = [...body.matchAll(/<a href="(https?:[^"]*)"/g)].map((m) => m[1]!);
    expect(hrefs.length).toBeGreaterThanOrEqual(2);
    for (const h of hrefs) expect(h).not.toMatch(/[<>"]/);
    // The hostile nick's page escapes it too.
    const nick = main(await page(`/irc/nick/${encodeURIComponent('"\'<img')}?network=testnet`));
    expect(nick).toContain('&quot;&#39;&lt;img');
    expect(nick).not.toContain('<img');
  });

  it('answers 404 pages for an unknown network, channel or day, a day without logs and a page past the end', async () => {
    for (const url of [
      '/irc/net/nowhere',
      '/irc/net/nowhere/%23lab',
      '/irc/net/testnet/%23nothing',
      '/irc/net/testnet/%23nothing/2024-03-10',
      `${LAB}/2024-03-12`,
      `${LAB}/2024-02-30`,
      `${LAB}/yesterday`,
      `${LAB}/2024-03-10?page=2`,
      '/irc/nick/nobody-at-all',
      '/irc/nick/alice?network=nowhere',
    ]) {
      const r = await get(url);
      expect(r.status, url).toBe(404);
      expect(r.headers['content-type'], url).toMatch(/^text\/html/);
      expect(r.body, url).toContain('data-status="404"');
    }
    // Hostile names in a 404 are escaped too.
    const r = await get('/irc/net/%3Cscript%3Ealert(1)%3C%2Fscript%3E');
    expect(r.status).toBe(404);
    expect(r.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(r.body).not.toContain('<script>alert');
    // Bad parameters are 422 pages, never 500.
    for (const url of [`${LAB}?year=20x4`, `${LAB}/2024-03-10?all=2`, `${LAB}/2024-03-10?page=0`, '/irc/net/a%00b']) {
      const bad = await get(url);
      expect(bad.status, url).toBe(422);
      expect(bad.headers['content-type'], url).toMatch(/^text\/html/);
    }
    // A path part over the router's limit: the reader's error page, without the path echoed.
    const long = `/irc/nick/${'n'.repeat(220)}`;
    const tooLong = await get(long);
    expect(tooLong.status).toBe(414);
    expect(tooLong.headers['content-type']).toMatch(/^text\/html/);
    expect(tooLong.body).toContain('data-status="414"');
    expect(tooLong.body).toContain('longer than 100 characters');
    expect(tooLong.body).not.toContain('n'.repeat(220));
    // The API keeps its JSON shape, also without the path.
    const api = await t.app.inject({ method: 'GET', url: `/irc/api/x/${'n'.repeat(220)}` });
    if (api.statusCode === 414)
      expect(api.json()).toEqual({ success: false, error: 'A part of the address (a path parameter) is longer than 100 characters.' });
  });

  it('pages a long day', async () => {
    const body = main(await page('/irc/net/testnet/%23busy/2024-04-01'));
    expect(body.match(/<tr id="L/g)).toHaveLength(120);
    expect(body).not.toContain('class="paging"');
    const FLOOD_DAY = '/irc/net/testnet/%23flood/2024-04-02';
    const first = main(await page(FLOOD_DAY));
    expect(first.match(/<tr id="L/g)).toHaveLength(DAY_PAGE);
    expect(first).toContain('flood 1<');
    expect(first).toContain(`<a href="${FLOOD_DAY}?page=2">2</a>`);
    const second = main(await page(`${FLOOD_DAY}?page=2`));
    expect(second.match(/<tr id="L/g)).toHaveLength(5);
    expect(second).toContain(`flood ${DAY_PAGE + 5}<`);
    expect(second).not.toContain('flood 1<');
    expect((await get(`${FLOOD_DAY}?page=3`)).status).toBe(404);
    // A link from outside the day (search results, nick pages) names the line; the page that holds it is shown.
    const result = main(await page(`/irc/search?q=${DAY_PAGE + 3}&channel_id=${await channelId('#flood')}`));
    const link = /<td class="time"><a href="([^"]+)"/.exec(result)![1]!.replace(/&amp;/g, '&');
    const lineId = /#L(\d+)$/.exec(link)![1];
    expect(link).toBe(`${FLOOD_DAY}?at=${lineId}#L${lineId}`);
    const target = main(await page(link.replace(/#.*/, '')));
    expect(target).toContain(`<tr id="L${lineId}"`);
    expect(target).toContain('<strong aria-current="page">2</strong>');
    expect(main(await page(`${FLOOD_DAY}?at=1`))).toContain('flood 1<');
  });
});

describe('search page', () => {
  it('shows the form alone until asked', async () => {
    const body = main(await page('/irc/search'));
    expect(body).toContain('<input id="q" name="q"');
    expect(body).not.toContain('id="search-results"');
  });

  it('finds words, marks them after escaping, and links each result to its line', async () => {
    const body = main(await page('/irc/search?q=world'));
    expect(body).toContain('id="result-count">2 results');
    expect(body).toContain('hello <mark>world</mark> from the lab');
    expect(body).toContain('good morning <mark>world</mark>');
    const id = /<tr id="L(\d+)"[^>]*><td class="time"><a href="([^"]+)"/.exec(body)!;
    expect(id[2]).toBe(`${LAB}/2024-03-10?at=${id[1]}#L${id[1]}`);
    // A term inside hostile markup is marked in the escaped text, never in the markup.
    const script = main(await page('/irc/search?q=script'));
    expect(script).toContain('&lt;<mark>script</mark>&gt;alert(&quot;xss&quot;)&lt;/<mark>script</mark>&gt;');
    expect(script).not.toContain('<script');
    // A term that is also a part of an entity ("amp", "quot") never breaks one.
    const amp = main(await page('/irc/search?q=quot'));
    expect(amp).not.toMatch(/&<mark>|<mark>quot<\/mark>;/);
    // Phrases, prefixes and the nick filter.
    expect(main(await page('/irc/search?q=%22phrase+search%22'))).toContain('testing <mark>phrase search</mark>');
    expect(main(await page('/irc/search?q=hel*'))).toContain('<mark>hello</mark> world');
    const byNick = main(await page('/irc/search?nick=alice&order=desc'));
    expect(byNick).toContain('good morning world');
    expect(byNick.indexOf('good morning world')).toBeLessThan(byNick.indexOf('hello world'));
    // A link in a result is an anchor with the match marked inside.
    expect(main(await page('/irc/search?q=docs'))).toContain('rel="nofollow noopener ugc">https://example.org/<mark>docs</mark>?a=1&amp;b=2</a>');
  });

  it('pages results 50 at a time with links that keep the query', async () => {
    const first = main(await page('/irc/search?q=pagingword&network_id=&date_from=&order=asc'));
    expect(first).toContain('Results 1–50 of 120');
    expect(first.match(/<tr id="L/g)).toHaveLength(50);
    expect(first).not.toContain('id="prev-page"');
    const next = /id="next-page" href="([^"]+)"/.exec(first)![1]!.replace(/&amp;/g, '&');
    expect(next).toBe('/irc/search?q=pagingword&order=asc&offset=50');
    const second = main(await page(next));
    expect(second).toContain('Results 51–100 of 120');
    expect(second).toContain('pagingword</mark> number 51<');
    const last = main(await page('/irc/search?q=pagingword&offset=100'));
    expect(last).toContain('Results 101–120 of 120');
    expect(last).not.toContain('id="next-page"');
    expect(last).toContain('id="prev-page" href="/irc/search?q=pagingword&amp;offset=50"');
  });

  it('narrows to a channel and shows bad searches as a 422 with the form', async () => {
    const chan = main(await page(`/irc/search?q=the&channel_id=${await labId()}`));
    expect(chan).toContain('release notes');
    expect(chan).not.toContain('#busy');
    const bad = await get('/irc/search?q=*ab');
    expect(bad.status).toBe(422);
    expect(main(bad.body)).toContain('id="search-error"');
    expect(main(bad.body)).toContain('needs at least 3 characters');
    expect(main(bad.body)).toContain('value="*ab"');
    // The sandbox archive is never searched here.
    expect(main(await page('/irc/search?q=sandbox'))).toContain('No results.');
    expect((await get('/irc/search?source=sandbox&q=sandbox')).body).not.toContain('sandbox only words');
  });
});

describe('nick page', () => {
  it('shows aliases, first and last seen, the last message and activity per month', async () => {
    const body = main(await page('/irc/nick/alice?network=testnet'));
    expect(body).toMatch(/id="aliases"><a class="nick nick-c\d+" href="\/irc\/nick\/alice_away\?network=testnet">alice_away<\/a>/);
    expect(body).toContain('id="first-seen">2024-03-10 10:00:00 UTC');
    expect(body).toContain('id="last-seen">2024-03-11 09:00:00 UTC');
    expect(body).toContain('id="last-message">2024-03-11 09:00:00 UTC');
    expect(body).toContain('good morning world');
    expect(body).toMatch(/<tr data-month="2024-03"><td>2024-03<\/td><td class="num">4<\/td><td class="num">6<\/td>/);
    // Without a network: every production network.
    expect(main(await page('/irc/nick/ALICE_away'))).toContain('id="first-seen">2024-03-10 10:00:00 UTC');
    const frank = main(await page('/irc/nick/frank'));
    expect(frank).toContain('never spoke');
  });
});

describe('rows per channel and day (irc_channel_days) and pair counts of common and frequent terms (irc_term_pairs), kept at write time', () => {
  const recount = async () => {
    const k = t.orm.em.getConnection().getKnex();
    const kept = (await k.raw(`select channel_id, to_char(day, 'YYYY-MM-DD') as day, events, messages from irc_channel_days where events > 0 order by 1, 2`))
      .rows;
    const counted = (
      await k.raw(
        `select channel_id, to_char(occurred_at, 'YYYY-MM-DD') as day, count(*) as events, count(*) filter (where event_type in ('PRIVMSG', 'ACTION', 'NOTICE')) as messages
           from irc_events group by 1, 2 order by 1, 2`,
      )
    ).rows;
    const pairs = await pairCounts(t);
    expect(pairs.rows).toBeGreaterThan(100);
    return { kept: JSON.stringify([kept, pairs.kept]), counted: JSON.stringify([counted, pairs.counted]) };
  };

  it('match the rows after imports, a re-import, a delete and a batch revert, and the calendar follows', async () => {
    let r = await recount();
    expect(r.kept).toBe(r.counted);
    // A re-import adds nothing and changes no count.
    await new IrcImportService(t.orm).importPaths([path.join(dir, 'lab')], { network: 'testnet', source: 'production' });
    r = await recount();
    expect(r.kept).toBe(r.counted);
    // Deleting the afternoon of a day recounts that day; deleting a whole day removes it from the calendar.
    const corrections = new IrcCorrectionService(t.orm);
    await corrections.deleteRows({ source: 'production', network: 'testnet', channel: '#lab', from: '2024-03-10 10:03:01', to: '2024-03-10 23:59:59' });
    await corrections.deleteRows({ source: 'production', network: 'testnet', channel: '#lab', from: '2024-03-11', to: '2024-03-11' });
    r = await recount();
    expect(r.kept).toBe(r.counted);
    const body = main(await page(LAB));
    expect(body).toContain('title="4 messages, 7 events" data-day="2024-03-10"');
    expect(body).not.toContain('data-day="2024-03-11"');
    expect((await get(`${LAB}/2024-03-11`)).status).toBe(404);
    // Reverting the import of a new file takes its day away again.
    const extra = path.join(dir, 'extra');
    mkdirSync(extra);
    writeFileSync(path.join(extra, '#lab_20240320.log'), '[08:00:00] <bob> a later day\n');
    await new IrcImportService(t.orm).importPaths([extra], { network: 'testnet', source: 'production' });
    r = await recount();
    expect(r.kept).toBe(r.counted);
    expect(main(await page(LAB))).toContain('data-day="2024-03-20"');
    const [batch] = await corrections.listBatches({ network: 'testnet' });
    await corrections.revertBatch(batch!.id);
    r = await recount();
    expect(r.kept).toBe(r.counted);
    expect(main(await page(LAB))).not.toContain('data-day="2024-03-20"');
  });
});

describe("the README's try-it step", () => {
  const repoRoot = path.resolve(import.meta.dirname, '../..');

  it('imports the committed sample with the real CLI, and the reader shows it', async () => {
    // The sample is in the repository (not caught by .gitignore's *.log), as a fresh clone has it.
    const tracked = execFileSync('git', ['ls-files', 'deploy/samples/irc'], { cwd: repoRoot, encoding: 'utf8' }).trim().split('\n');
    expect(tracked).toEqual(['deploy/samples/irc/#example_20260101.log', 'deploy/samples/irc/#example_20260102.log']);
    // --no-index: .gitignore's rules alone (a tracked file would pass anyway), so `git add` of a new sample works too.
    expect(spawnSync('git', ['check-ignore', '--no-index', ...tracked], { cwd: repoRoot }).status).toBe(1);
    // The exact command of the README's quick start, against this test's database.
    const run = spawnSync('npm', ['run', '--silent', 'cli', '--', 'irc:import', '--network', 'example', '--source', 'production', 'deploy/samples/irc'], {
      cwd: repoRoot,
      env: { ...process.env, ...testEnv(t.db) },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
    const body = main(await page('/irc/net/example/%23example?year=2026'));
    expect(body).toContain('data-day="2026-01-01"');
    expect(body).toContain('data-day="2026-01-02"');
    const nick = main(await page('/irc/nick/linus?network=example'));
    expect(nick).toContain('linus_afk');
  }, 150_000);
});

describe('rate limit', () => {
  it('counts the pages against the chat-log budget per client, shared with /irc/api', async () => {
    const small = await createTestApp({ env: { IRC_API_RATE_LIMIT_MAX: '3' } });
    try {
      const hit = (url: string) => small.app.inject({ method: 'GET', url, headers: { accept: 'text/html' }, remoteAddress: '198.51.100.7' });
      expect((await hit('/irc')).statusCode).toBe(200);
      expect((await hit('/irc/api/networks')).statusCode).toBe(200);
      expect((await hit('/irc/search')).statusCode).toBe(200);
      const over = await hit('/irc');
      expect(over.statusCode).toBe(429);
      expect(over.headers['retry-after']).toBeDefined();
      expect(over.headers['content-type']).toMatch(/^text\/html/);
      expect((await hit('/irc/api/networks')).statusCode).toBe(429);
      // Another client has its own budget.
      expect((await small.app.inject({ method: 'GET', url: '/irc', remoteAddress: '198.51.100.8' })).statusCode).toBe(200);
    } finally {
      await small.close();
    }
  });
});

async function channelId(name: string): Promise<number> {
  const k = t.orm.em.getConnection().getKnex();
  return Number((await k.raw(`select id from irc_channels where name = ?`, [name])).rows[0].id);
}
const labId = () => channelId('#lab');
