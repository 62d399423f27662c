import {
  SWAPPABLE_JOB_PAGE_CARDS,
  UNRESPONSIVE_WARNING_SECONDS,
  WORKER_CARD_REFRESH_MS,
  estimateFinish,
  formatStockholm,
  formatStockholmTime,
} from '@sonar/shared/display';
import type { LiveSegment } from '@sonar/shared/live-events';
import { api } from '../lib/api.js';
import { byIdAs, el, maybeId } from '../lib/dom.js';
import { connectLive } from '../lib/live.js';
import { ReadingView, bindSearch } from '../lib/reading.js';
import { bindPlayer } from '../lib/player.js';
import { bindCorrections } from '../lib/corrections.js';

/**
 * /speech/jobs/{id}. The server renders every card; this module keeps them true while the page is
 * open. On every live event but `segment` it fetches the cards that event can change from
 * GET /speech/jobs/{id}/cards (the same render functions as the page) and swaps them into their
 * `data-card` slots, keeping the scroll position and whatever the user is typing. Segments stream
 * into the transcript as they arrive; progress and the estimated finish move with each progress
 * event in between. The liveness warning appears after 90 s of heartbeat silence, and the worker
 * card is fetched again every 15 s while the tab is visible. Times go through the same
 * Europe/Stockholm formatter as the server's (@sonar/shared/display); timers use the page's clock
 * (Date.now, setInterval), which the browser tests replace with a controllable one.
 */

const list = byIdAs('segments', HTMLDivElement);
const view = new ReadingView(list);
const search = bindSearch(view);
let player = bindPlayer(view);
const jobId = Number(list.dataset.job);
let attempt = Number(list.dataset.attempt);
let pass = Number(list.dataset.pass);
const PROCESSING = new Set(['downloading', 'transcribing', 'finalizing']);

/** Every card the cards route renders (the page's slots), and what each kind of event can change. */
const ALL = SWAPPABLE_JOB_PAGE_CARDS;
type Card = (typeof ALL)[number];
const ON_PROGRESS: readonly Card[] = ['summary'];
const ON_AI: readonly Card[] = ['summary', 'analysis', 'translations', 'metadata', 'runtime-log'];
const ON_WORKER_TICK: readonly Card[] = ['liveness', 'worker'];

// ---- transcript ------------------------------------------------------------------------------

/** A segment of the snapshot or the labelled pass (the current pass), or a live one (which names its pass). */
function addSegment(s: LiveSegment & { pass?: number }) {
  // A segment of an earlier pass is not current; one of a newer pass (a re-transcription) starts it over.
  if (s.pass !== undefined && s.pass < pass) return;
  if (s.pass !== undefined && s.pass > pass) follow({ attempt, pass: s.pass });
  if (view.has(s.seq)) return;
  view.add(s);
  maybeId('new-attempt')?.remove();
  search?.refresh();
}

/** A new attempt (restart, recovery after a lost runner) or a new pass starts the transcript over. */
function clearSegments() {
  view.clear();
}

/** The attempt and pass the server says the job is on; a newer one clears the segments of the old. */
function follow(next: { attempt: number; pass?: number }) {
  const newPass = next.pass !== undefined && next.pass !== pass;
  if (next.attempt > attempt || newPass) clearSegments();
  attempt = Math.max(attempt, next.attempt);
  if (next.pass !== undefined) pass = next.pass;
  list.dataset.attempt = String(attempt);
  list.dataset.pass = String(pass);
}

// ---- cards -----------------------------------------------------------------------------------

interface CardsAnswer {
  job: { id: number; status: string; attempt: number; pass: number };
  cards: Partial<Record<Card, string>>;
}

/** A form field the user changed and has not saved: its key (id, else name) and what it holds now. */
interface Edited {
  key: string;
  value: string;
  checked: boolean;
  selection: [number | null, number | null] | null;
}
const fieldKey = (f: Element) => f.id || f.getAttribute('name') || '';
const fields = (root: ParentNode) => [...root.querySelectorAll<HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement>('input, textarea, select')];
function isEdited(f: HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement): boolean {
  if (f instanceof HTMLSelectElement) return [...f.options].some((o) => o.selected !== o.defaultSelected);
  if (f instanceof HTMLInputElement && (f.type === 'checkbox' || f.type === 'radio')) return f.checked !== f.defaultChecked;
  return f.value !== f.defaultValue;
}

/** Puts a card's new HTML into its slot, carrying over fields being edited and the focus. */
function swap(slot: HTMLElement, markup: string) {
  const edited: Edited[] = [];
  const active = document.activeElement;
  let focused: string | null = null;
  for (const f of fields(slot)) {
    const key = fieldKey(f);
    if (!key) continue;
    if (f === active) focused = key;
    if (isEdited(f) || f === active) {
      const text = f instanceof HTMLInputElement || f instanceof HTMLTextAreaElement;
      let selection: Edited['selection'];
      try {
        selection = text ? [f.selectionStart, f.selectionEnd] : null;
      } catch {
        selection = null; // inputs without a text selection (number, email…) throw
      }
      edited.push({ key, value: f.value, checked: f instanceof HTMLInputElement ? f.checked : false, selection });
    }
  }
  const template = document.createElement('template');
  template.innerHTML = markup;
  // A refused form post's message (the page came back with it, 422) stays until the next page:
  // it answers what the user just did, which no later state of the job takes back.
  for (const alert of slot.querySelectorAll<HTMLElement>('.error[role="alert"][id]')) {
    const card = template.content.firstElementChild;
    if (card && !template.content.getElementById(alert.id)) card.querySelector('h2')?.after(alert);
  }
  for (const e of edited) {
    const f = fields(template.content).find((x) => fieldKey(x) === e.key);
    if (!f) continue;
    if (f instanceof HTMLInputElement && (f.type === 'checkbox' || f.type === 'radio')) f.checked = e.checked;
    else if (!(f instanceof HTMLInputElement && f.type === 'hidden')) f.value = e.value;
  }
  slot.replaceChildren(template.content);
  if (focused) {
    const f = fields(slot).find((x) => fieldKey(x) === focused);
    if (f) {
      f.focus({ preventScroll: true });
      const e = edited.find((x) => x.key === focused);
      if (e?.selection && (f instanceof HTMLInputElement || f instanceof HTMLTextAreaElement)) {
        try {
          f.setSelectionRange(e.selection[0], e.selection[1]);
        } catch {
          // no selection on this kind of input
        }
      }
    }
  }
}

/**
 * A card that names what it shows (`data-swap-key`: the player's media) and still shows the same
 * is left as it is, so a live refresh never restarts the media being played.
 */
function sameSwapKey(slot: HTMLElement, markup: string): boolean {
  const key = slot.firstElementChild?.getAttribute('data-swap-key');
  if (!key) return false;
  const match = /^\s*<[^>]*\sdata-swap-key="([^"]*)"/.exec(markup);
  return match?.[1] === key.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
}

/**
 * Swaps cards without moving what the reader looks at: the first card still on screen keeps its
 * distance from the top of the window even when cards above it grow or shrink.
 */
function applyCards(answer: CardsAnswer) {
  follow(answer.job);
  const anchor = [...document.querySelectorAll<HTMLElement>('main .card')].find((c) => c.getBoundingClientRect().bottom > 0) ?? null;
  const anchorSlot = anchor?.closest<HTMLElement>('.slot[data-card]') ?? null;
  const before = anchor?.getBoundingClientRect().top ?? 0;
  for (const [name, markup] of Object.entries(answer.cards)) {
    const slot = document.querySelector<HTMLElement>(`.slot[data-card="${name}"]`);
    if (!slot || markup === undefined || sameSwapKey(slot, markup)) continue;
    swap(slot, markup);
    if (name === 'player') {
      player?.destroy();
      player = bindPlayer(view);
    }
  }
  const now = anchor?.isConnected ? anchor : (anchorSlot?.querySelector<HTMLElement>('.card') ?? null);
  if (now && window.scrollY > 0) {
    const moved = now.getBoundingClientRect().top - before;
    if (moved) window.scrollBy(0, moved);
  }
  afterSwap();
}

const wanted = new Set<Card>();
let running: Promise<void> | null = null;
let lastProgressFetch = 0;

/**
 * Fetches the named cards (with any still wanted), one request at a time so answers apply in
 * order; what is asked for meanwhile goes out in the next request. Resolves false when the fetch
 * failed (the cards stay wanted and go out with the next request).
 */
function refresh(cards: readonly Card[]): Promise<boolean> {
  for (const c of cards) wanted.add(c);
  return (running ??= drain()).then(() => !wanted.size);
}
async function drain() {
  // `data-cards` on <html>: "loading" while cards are on their way, "synced" once every wanted card is in.
  document.documentElement.dataset.cards = 'loading';
  try {
    while (wanted.size) {
      const names = ALL.filter((c) => wanted.has(c));
      wanted.clear();
      try {
        applyCards(await api<CardsAnswer>(`/speech/jobs/${jobId}/cards?only=${names.join(',')}`));
      } catch (err) {
        for (const n of names) wanted.add(n);
        lastError = err instanceof Error ? err.message : String(err);
        return;
      }
    }
  } finally {
    running = null;
    document.documentElement.dataset.cards = wanted.size ? 'failed' : 'synced';
  }
}
let lastError = '';

// ---- progress and the estimated finish between card fetches ----------------------------------

/** A progress event: the worker's audio position moves the percentage and the estimate at once. */
function showProgress(position: number, at: number) {
  const progress = maybeId('job-progress');
  const eta = maybeId('job-eta');
  if (!progress || !eta || !PROCESSING.has(maybeId('job-status')?.dataset.status ?? '')) return;
  const duration = Number(progress.dataset.duration) || null;
  const known = Number(progress.dataset.position) || 0;
  if (position <= known) return;
  progress.dataset.position = String(position);
  if (duration) progress.textContent = `${Math.min(100, Math.round((position / duration) * 1000) / 10)} %`;
  const finish = estimateFinish({
    durationSeconds: duration,
    positionSeconds: position,
    startedAt: progress.dataset.started || null,
    progressAt: new Date(at),
  });
  if (!finish) return;
  const time = el('time', { text: formatStockholm(finish) });
  time.dateTime = finish.toISOString();
  eta.replaceChildren(time);
}

// ---- liveness --------------------------------------------------------------------------------

/**
 * The silence is measured on this page's clock from a fixed point: the card says how long ago the
 * last heartbeat was when it was rendered. A card that reports a NEW heartbeat moves that point;
 * one that reports the same heartbeat does not (the silence simply goes on).
 */
let heartbeat: { at: string; silenceAtSync: number; syncedAt: number } | null = null;
let serverText = '';

function syncLiveness() {
  const liveness = maybeId('liveness');
  if (!liveness) return;
  serverText = maybeId('liveness-state')?.textContent ?? '';
  const { lastHeartbeat, secondsSinceHeartbeat } = liveness.dataset;
  if (!lastHeartbeat || !secondsSinceHeartbeat) heartbeat = null;
  else if (!heartbeat || heartbeat.at !== lastHeartbeat) heartbeat = { at: lastHeartbeat, silenceAtSync: Number(secondsSinceHeartbeat), syncedAt: Date.now() };
  evaluateLiveness();
}

function evaluateLiveness() {
  const liveness = maybeId('liveness');
  const warning = maybeId('liveness-warning');
  const stateText = maybeId('liveness-state');
  if (!liveness || !warning || !stateText) return;
  const processing = liveness.dataset.processing === '1';
  const warnAfter = Number(liveness.dataset.warnAfter) || UNRESPONSIVE_WARNING_SECONDS;
  const state = liveness.dataset.state ?? 'inactive';
  const silence = heartbeat ? heartbeat.silenceAtSync + (Date.now() - heartbeat.syncedAt) / 1000 : null;
  const warn = processing && (state === 'unresponsive' || state === 'stale' || (silence !== null && silence >= warnAfter));
  warning.hidden = !warn;
  const silenceEl = maybeId('silence-seconds');
  if (silence !== null && silenceEl) silenceEl.textContent = String(Math.floor(silence));
  // The server's sentence ("working and reporting progress") is stale once the silence is this long.
  stateText.textContent = warn ? 'No heartbeat for 90 seconds or more.' : serverText;
}

/** After cards were swapped: the liveness clock re-reads its card; the title field follows nothing. */
function afterSwap() {
  syncLiveness();
  bindAdminTarget();
}
setInterval(evaluateLiveness, 1000);
syncLiveness();

/** The target selector's reason line (admin.js binds the first render; swapped cards are bound here). */
function bindAdminTarget() {
  const select = maybeId('target-select');
  const reason = maybeId('target-reason');
  if (!(select instanceof HTMLSelectElement) || !reason || select.dataset.bound) return;
  select.dataset.bound = '1';
  const show = () => {
    reason.textContent = select.selectedOptions[0]?.dataset.reason ?? '';
  };
  select.addEventListener('change', show);
  show();
}

// ---- worker card -----------------------------------------------------------------------------

let lastGood = Date.now();
let lastTry = 0;

async function refreshWorker() {
  lastTry = Date.now();
  const refreshed = maybeId('worker-refreshed');
  if (refreshed) refreshed.dataset.state = 'loading';
  if (await refresh(ON_WORKER_TICK)) {
    lastGood = Date.now();
    const fresh = maybeId('worker-refreshed');
    if (fresh) fresh.dataset.state = 'ok';
  } else {
    // Keep the last valid snapshot on the card; say that it is getting old and why.
    const stale = maybeId('worker-refreshed');
    if (stale) {
      stale.dataset.state = 'failed';
      stale.textContent = `Refresh failed at ${formatStockholmTime(Date.now())} (${lastError}); showing the snapshot of ${formatStockholmTime(lastGood)}.`;
    }
  }
}

setInterval(() => {
  if (document.visibilityState === 'visible') void refreshWorker();
}, WORKER_CARD_REFRESH_MS);
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && Date.now() - lastTry >= WORKER_CARD_REFRESH_MS) void refreshWorker();
});

// ---- live events -----------------------------------------------------------------------------

let shown = { status: maybeId('job-status')?.dataset.status ?? '', stage: maybeId('job-stage')?.textContent ?? '', attempt };

const socket = connectLive([jobId]);
socket.on('snapshot', (snap) => {
  if (snap.job_id !== jobId) return;
  // The snapshot is the current pass of the current attempt: segments it lacks are not current.
  const current = new Set(snap.segments.map((s) => s.seq));
  if (snap.pass !== pass || view.seqs().some((seq) => !current.has(seq))) {
    clearSegments();
    pass = snap.pass;
    list.dataset.pass = String(pass);
  }
  snap.segments.forEach(addSegment);
  // Whatever happened between the page's render and this subscription (a job that failed 30 ms
  // after it was created) was not heard live: every card is fetched once now, and on reconnects.
  void refresh(ALL);
});
socket.on('segment', (s) => {
  if (s.job_id === jobId) addSegment(s);
});
socket.on('status', (st) => {
  if (st.job_id !== jobId) return;
  if (st.attempt > attempt || (st.status === 'queued' && view.size)) clearSegments();
  const changed = st.status !== shown.status || (st.stage_label ?? '') !== shown.stage || st.attempt !== shown.attempt;
  follow({ attempt: st.attempt });
  shown = { status: st.status, stage: st.stage_label ?? '', attempt: st.attempt };
  if (changed) {
    void refresh(ALL);
    return;
  }
  // Progress within the same stage: the numbers move now; the summary card follows at most every 2 s.
  showProgress(st.audio_position_seconds, Date.now());
  if (Date.now() - lastProgressFetch >= 2000) {
    lastProgressFetch = Date.now();
    void refresh(ON_PROGRESS);
  }
});

// Speaker identification started or ended: the labelled segments (when it ended) or each
// segment's speaker, and the cards that show it.
socket.on('diarization', (d) => {
  if (d.job_id !== jobId) return;
  if (d.segments) {
    // The labelled pass: segments whose words change speaker were split and renumbered.
    clearSegments();
    d.segments.forEach((s) => addSegment(s));
  } else if (d.speakers?.length) {
    view.relabel(d.speakers);
  }
  // Every card: the downloads (speaker turns), the transcript notes, the actions and the log all
  // read the diarization, and a list kept here by hand fell behind once already.
  void refresh(ALL);
});
socket.on('analysis', (ev) => {
  if (ev.job_id === jobId) void refresh(ON_AI);
});
socket.on('changed', (ev) => {
  if (ev.job_id !== jobId) return;
  if (ev.what === 'transcript') void refreshReading();
  void refresh(ALL);
});

// ---- corrections: the owner's editor, and the corrected text in every open tab -------------------

/**
 * The transcript's text as the server renders it now (after a correction here or in another
 * tab): swapped in whole, the page's other cards following through the `changed` event.
 */
async function refreshReading() {
  try {
    const answer = await api<{ cards: { reading?: string } }>(`/speech/jobs/${jobId}/cards?only=reading`);
    if (answer.cards.reading !== undefined) view.replace(answer.cards.reading);
    list.dataset.revision = String(Number(list.dataset.revision ?? 0) + 1);
    search?.refresh();
  } catch (err) {
    lastError = err instanceof Error ? err.message : String(err);
  }
}
bindCorrections(view, jobId, () => Promise.all([refreshReading(), refresh(ALL)]));

// ---- the owner's title and note, and "Analyse again" (delegated: the cards are swapped) --------

const say = (id: string, text: string) => {
  const target = maybeId(id);
  if (target) target.textContent = text;
};
const failure = (e: unknown) => (e instanceof Error ? e.message : String(e));

document.addEventListener('submit', (ev) => {
  const form = ev.target;
  if (!(form instanceof HTMLFormElement) || form.id !== 'metadata-form') return;
  ev.preventDefault();
  const title = form.elements.namedItem('source_label') as HTMLInputElement;
  const note = form.elements.namedItem('source_note') as HTMLTextAreaElement;
  say('metadata-status', 'Saving…');
  api(`/api/speech/jobs/${jobId}`, { method: 'PATCH', body: { source_label: title.value, source_note: note.value } }).then(
    () => {
      // Saved: what the fields hold is now the card's own state, not an edit to carry over.
      title.defaultValue = title.value;
      note.defaultValue = note.value;
      say('metadata-status', 'Saved.');
    },
    (e: unknown) => say('metadata-status', failure(e)),
  );
});

document.addEventListener('click', (ev) => {
  const button = ev.target instanceof Element ? ev.target.closest('button') : null;
  if (button?.id === 'suggest-title') {
    say('metadata-status', 'Asking for a title…');
    api<{ title: string }>(`/api/speech/jobs/${jobId}/title-suggestion`, { method: 'POST' }).then(
      (res) => {
        const title = maybeId('meta-title');
        if (title instanceof HTMLInputElement) title.value = res.title;
        say('metadata-status', 'Suggested; save to keep it.');
      },
      (e: unknown) => say('metadata-status', failure(e)),
    );
  }
  if (button?.id === 'analyze') {
    api(`/api/speech/jobs/${jobId}/analyze`, { method: 'POST' }).then(
      () => say('analyze-status', 'Queued.'),
      (e: unknown) => say('analyze-status', failure(e)),
    );
  }
});
