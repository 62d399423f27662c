import { UNRESPONSIVE_WARNING_SECONDS, WORKER_CARD_REFRESH_MS, estimateFinish, formatStockholm, formatStockholmTime, mediaClock } from '@sonar/shared/display';
import { api } from '../lib/api.js';
import { byId, byIdAs, el, maybeId } from '../lib/dom.js';
import { connectLive, type LiveDiarization, type LiveSegment, type LiveSnapshot, type LiveStatus } from '../lib/live.js';

/**
 * /speech/jobs/{id}: live transcript and status (socket.io), the liveness warning after 90 s of
 * heartbeat silence, the estimated finish from completed-segment timing, and the worker card
 * refreshed every 15 s while the tab is visible. All times go through the same Europe/Stockholm
 * formatter as the server's (@sonar/shared/display). Timers use the page's clock (Date.now,
 * setInterval), which the browser tests replace with a controllable one.
 */

const list = byIdAs('segments', HTMLOListElement);
const jobId = Number(list.dataset.job);
let attempt = Number(list.dataset.attempt);
const PROCESSING = new Set(['downloading', 'transcribing', 'finalizing']);

// ---- transcript ------------------------------------------------------------------------------

const seen = new Set([...list.querySelectorAll<HTMLLIElement>('li')].map((li) => Number(li.dataset.seq)));

function addSegment(s: LiveSegment) {
  if (seen.has(s.seq)) return;
  seen.add(s.seq);
  const li = el('li', { data: { seq: String(s.seq), end: String(s.end) } });
  const who = el('span', { className: 'who', data: { speaker: s.speaker ?? '' }, text: s.speaker ? `Speaker ${s.speaker.slice(1)}` : '' });
  li.append(el('span', { className: 'muted', text: mediaClock(s.start) }), ' ', who, ` ${s.text}`);
  const after = [...list.children].find((x) => Number((x as HTMLElement).dataset.seq) > s.seq);
  list.insertBefore(li, after ?? null);
  maybeId('new-attempt')?.remove();
  updateEta(s.end, Date.now());
}

/** A new attempt (restart, or recovery after a lost runner) starts the pass over: the old segments go. */
function clearSegments() {
  list.replaceChildren();
  seen.clear();
}

// ---- status ----------------------------------------------------------------------------------

const statusEl = byId('job-status');
function setStatus(st: { status: string; status_label?: string; stage_label: string | null }) {
  if (st.status_label) statusEl.textContent = st.status_label;
  statusEl.dataset.status = st.status;
  byId('job-stage').textContent = st.stage_label ?? '';
  liveness.dataset.processing = PROCESSING.has(st.status) ? '1' : '0';
  evaluateLiveness();
}

// ---- estimated finish ------------------------------------------------------------------------

const progress = byId('job-progress');
const eta = byId('job-eta');
function updateEta(position: number, at: number) {
  const finish = estimateFinish({
    durationSeconds: Number(progress.dataset.duration) || null,
    positionSeconds: position,
    startedAt: progress.dataset.started || null,
    progressAt: new Date(at),
  });
  if (!finish || statusEl.dataset.status === 'completed') return;
  const time = el('time', { text: formatStockholm(finish) });
  time.dateTime = finish.toISOString();
  eta.replaceChildren(time);
}

// ---- liveness --------------------------------------------------------------------------------

const liveness = byId('liveness');
const warning = byId('liveness-warning');
const silenceEl = byId('silence-seconds');
const warnAfter = Number(liveness.dataset.warnAfter) || UNRESPONSIVE_WARNING_SECONDS;
const stateText = byId('liveness-state');
let serverText = stateText.textContent ?? '';

/**
 * The silence is measured on this page's clock from a fixed point: when the page was rendered the
 * server said how long ago the last heartbeat was. A refresh that reports a NEW heartbeat moves that
 * point; one that reports the same heartbeat does not (the silence simply goes on).
 */
let heartbeat: { at: string; silenceAtSync: number; syncedAt: number } | null =
  liveness.dataset.secondsSinceHeartbeat && liveness.dataset.lastHeartbeat
    ? { at: liveness.dataset.lastHeartbeat, silenceAtSync: Number(liveness.dataset.secondsSinceHeartbeat), syncedAt: Date.now() }
    : null;
let serverState = liveness.dataset.state ?? 'inactive';

function evaluateLiveness() {
  const processing = liveness.dataset.processing === '1';
  const silence = heartbeat ? heartbeat.silenceAtSync + (Date.now() - heartbeat.syncedAt) / 1000 : null;
  const warn = processing && (serverState === 'unresponsive' || serverState === 'stale' || (silence !== null && silence >= warnAfter));
  warning.hidden = !warn;
  if (silence !== null) silenceEl.textContent = String(Math.floor(silence));
  // The server's sentence ("working and reporting progress") is stale once the silence is this long.
  stateText.textContent = warn ? 'No heartbeat for 90 seconds or more.' : serverText;
}
setInterval(evaluateLiveness, 1000);
evaluateLiveness();

const LIVENESS_TEXT: Record<string, string> = {
  inactive: 'No runner is working on this job.',
  active: 'A runner is working on this job and reporting progress.',
  quiet: 'The runner sends heartbeats but has reported no progress for a while.',
  unresponsive: 'No heartbeat for 90 seconds or more.',
  stale: 'No heartbeat and the lease has expired: automatic recovery will queue the job again.',
  suspect: 'Something is off; reload the page for the reason.',
};

// ---- worker card -----------------------------------------------------------------------------

interface JobDetail {
  job: {
    status: string;
    status_label: string;
    stage_label: string | null;
    attempt: number;
    execution_target: { mode: string; worker: string | null };
    liveness: {
      state: string;
      worker: string | null;
      attempt: number | null;
      last_heartbeat_at: string | null;
      seconds_since_heartbeat: number | null;
      lease_expires_at: string | null;
    };
  };
}

const refreshed = byId('worker-refreshed');
let lastGood = Date.now();
let lastTry = 0;

function showSnapshot(d: JobDetail['job']) {
  const l = d.liveness;
  byId('worker-name').textContent = l.worker ?? 'none';
  byId('worker-attempt').textContent = l.attempt === null ? '—' : String(l.attempt);
  byId('worker-heartbeat').textContent = l.last_heartbeat_at ? formatStockholm(l.last_heartbeat_at) : '—';
  byId('worker-lease').textContent = l.lease_expires_at ? formatStockholm(l.lease_expires_at) : '—';
  byId('worker-target').textContent = d.execution_target.mode === 'worker' ? `worker ${d.execution_target.worker ?? '?'}` : d.execution_target.mode;
  if (l.state !== serverState) serverText = LIVENESS_TEXT[l.state] ?? l.state;
  serverState = l.state;
  liveness.dataset.state = l.state;
  if (l.last_heartbeat_at === null || l.seconds_since_heartbeat === null) heartbeat = null;
  else if (!heartbeat || heartbeat.at !== l.last_heartbeat_at) {
    heartbeat = { at: l.last_heartbeat_at, silenceAtSync: l.seconds_since_heartbeat, syncedAt: Date.now() };
  }
  if (d.attempt > attempt) {
    attempt = d.attempt;
    clearSegments();
  }
  setStatus(d);
}

async function refreshWorker() {
  lastTry = Date.now();
  refreshed.dataset.state = 'loading';
  try {
    const { job } = await api<JobDetail>(`/api/speech/jobs/${jobId}`);
    showSnapshot(job);
    lastGood = Date.now();
    refreshed.dataset.state = 'ok';
    refreshed.textContent = `As of ${formatStockholmTime(lastGood)}.`;
  } catch (err) {
    // Keep the last valid snapshot on the card; say that it is getting old and why.
    refreshed.dataset.state = 'failed';
    refreshed.textContent = `Refresh failed at ${formatStockholmTime(Date.now())} (${(err as Error).message}); showing the snapshot of ${formatStockholmTime(lastGood)}.`;
  }
}

setInterval(() => {
  if (document.visibilityState === 'visible') void refreshWorker();
}, WORKER_CARD_REFRESH_MS);
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && Date.now() - lastTry >= WORKER_CARD_REFRESH_MS) void refreshWorker();
});

// ---- live events -----------------------------------------------------------------------------

const socket = connectLive([jobId]);
socket.on('snapshot', (snap: LiveSnapshot) => {
  if (snap.job_id !== jobId) return;
  // The snapshot is the current pass of the current attempt: segments it lacks are not current.
  const current = new Set(snap.segments.map((s) => s.seq));
  if ([...seen].some((seq) => !current.has(seq))) clearSegments();
  snap.segments.forEach(addSegment);
});
socket.on('segment', (s: LiveSegment) => {
  if (s.job_id === jobId) addSegment(s);
});
socket.on('status', (st: LiveStatus) => {
  if (st.job_id !== jobId) return;
  if (st.attempt > attempt || (st.status === 'queued' && seen.size)) clearSegments();
  attempt = Math.max(attempt, st.attempt);
  setStatus(st);
});

// Speaker identification started or ended: its state, and (when it ended) the labelled segments.
const DIARIZATION_TEXT: Record<string, string> = {
  pending: 'Waiting for a worker to identify the speakers.',
  running: 'Identifying speakers…',
  completed: 'Speakers identified; reload the page to name them.',
  failed: 'Speaker identification failed; reload the page for the reason.',
  unavailable: 'No speaker labels; reload the page for the reason.',
};
socket.on('diarization', (d: LiveDiarization) => {
  if (d.job_id !== jobId) return;
  const state = maybeId('diarization-state');
  if (state) {
    state.textContent = DIARIZATION_TEXT[d.state] ?? d.state;
    state.dataset.state = d.state;
  }
  if (d.segments) {
    // The labelled pass: segments whose words change speaker were split and renumbered.
    clearSegments();
    d.segments.forEach((s) => addSegment({ ...s, job_id: jobId }));
    return;
  }
  for (const s of d.speakers ?? []) {
    const who = list.querySelector<HTMLElement>(`li[data-seq="${s.seq}"] .who`);
    if (who) {
      who.dataset.speaker = s.speaker;
      who.textContent = `Speaker ${s.speaker.slice(1)}`;
    }
  }
});

// ---- analysis, translations, title and note -----------------------------------------------------

interface LiveAnalysis {
  job_id: number;
  kind: 'analysis' | 'translation' | 'title';
  state: string;
  language: string | null;
  title?: string;
}
interface AnalysisResult {
  summary: string;
  key_points: string[];
  action_items: string[];
  topics: string[];
}

const say = (id: string, text: string) => {
  const target = maybeId(id);
  if (target) target.textContent = text;
};
const failure = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** The owner's title and note form (saved with PATCH); "Suggest title" only fills the field. */
const metadata = document.getElementById('metadata-form') as HTMLFormElement | null;
const titleField = metadata?.elements.namedItem('source_label') as HTMLInputElement | null;
const noteField = metadata?.elements.namedItem('source_note') as HTMLTextAreaElement | null;
if (metadata && titleField && noteField) {
  metadata.addEventListener('submit', (ev) => {
    ev.preventDefault();
    say('metadata-status', 'Saving…');
    api(`/api/speech/jobs/${jobId}`, { method: 'PATCH', body: { source_label: titleField.value, source_note: noteField.value } }).then(
      () => say('metadata-status', 'Saved.'),
      (e: unknown) => say('metadata-status', failure(e)),
    );
  });
  maybeId('suggest-title')?.addEventListener('click', () => {
    say('metadata-status', 'Asking for a title…');
    api<{ title: string }>(`/api/speech/jobs/${jobId}/title-suggestion`, { method: 'POST' }).then(
      (res) => {
        titleField.value = res.title;
        say('metadata-status', 'Suggested; save to keep it.');
      },
      (e: unknown) => say('metadata-status', failure(e)),
    );
  });
}

maybeId('analyze')?.addEventListener('click', () => {
  api(`/api/speech/jobs/${jobId}/analyze`, { method: 'POST' }).then(
    () => say('analyze-status', 'Queued.'),
    (e: unknown) => say('analyze-status', failure(e)),
  );
});

function renderAnalysis(r: AnalysisResult | null | undefined) {
  const box = maybeId('analysis-result');
  if (!box) return;
  box.replaceChildren();
  if (!r) return;
  box.append(el('p', { text: r.summary }));
  for (const [title, items] of [
    ['Key points', r.key_points],
    ['Action items', r.action_items],
  ] as const) {
    if (!items.length) continue;
    const ul = el('ul');
    for (const i of items) ul.append(el('li', { text: i }));
    box.append(el('h3', { text: title }), ul);
  }
}

socket.on('analysis', (ev: LiveAnalysis) => {
  if (ev.job_id !== jobId) return;
  const card = maybeId('analysis');
  if (ev.kind === 'analysis' && card) {
    card.dataset.state = ev.state;
    say('analysis-state', ev.state);
    if (ev.state === 'completed') {
      api<{ job: { analysis: { result: AnalysisResult | null } | null } }>(`/api/speech/jobs/${jobId}`).then(
        (res) => renderAnalysis(res.job.analysis?.result),
        () => undefined,
      );
    }
  }
  if (ev.kind === 'translation') {
    const d = document.querySelector<HTMLElement>(`#translations details[data-language="${ev.language ?? ''}"]`);
    if (d) {
      d.dataset.state = ev.state;
      const s = d.querySelector('.translation-state');
      if (s) s.textContent = ev.state;
    }
  }
  if (ev.kind === 'title' && ev.title && titleField && document.activeElement !== titleField) titleField.value = ev.title;
});
