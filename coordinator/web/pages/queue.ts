import { DetailedError, Upload } from 'tus-js-client';
import { api } from '../lib/api.js';
import { byId, byIdAs, el } from '../lib/dom.js';
import { connectLive } from '../lib/live.js';

/**
 * /speech: uploads and the live queue table.
 *
 * Without this module the form posts one URL or one file to POST /speech. With it, several files
 * can be chosen, and each becomes its own upload and job with the same settings (batching happens in the
 * browser; a failed file does not stop the others). Files go through the
 * resumable tus endpoint (tus-js-client): the upload URL is remembered per file fingerprint, a
 * connection that fails is retried once automatically and only the bytes the server lacks are sent
 * again, so a body that arrived completely is never resent (rule 5).
 */

const form = byIdAs('submit-form', HTMLFormElement);
const fileInput = byIdAs('media_file', HTMLInputElement);
const status = byId('submit-status');
const results = byIdAs('submit-results', HTMLUListElement);
const csrf = form.dataset.csrf ?? '';
fileInput.multiple = true;
byId('media-hint').textContent = `${byId('media-hint').textContent?.split('.')[0] ?? ''}. Several files: one job per file.`;

interface QueuedJob {
  id: number;
}

function uploadError(err: Error): string {
  const res = err instanceof DetailedError ? err.originalResponse : null;
  if (res) {
    const body = res.getBody();
    try {
      const json = JSON.parse(body) as { message?: string };
      if (json.message) return json.message;
    } catch {
      // not JSON
    }
    return body.trim() || `HTTP ${res.getStatus()}`;
  }
  return err.message;
}

function uploadFile(file: File, common: Record<string, string>, onProgress: (percent: number) => void): Promise<QueuedJob> {
  return new Promise((resolve, reject) => {
    const upload: Upload = new Upload(file, {
      endpoint: '/api/speech/uploads',
      chunkSize: 32 * 1024 * 1024,
      // One automatic retry of a failed connection; tus asks the server for its offset first.
      retryDelays: [1000],
      headers: { 'X-CSRF-Token': csrf },
      metadata: { filename: file.name, filetype: file.type || 'application/octet-stream', ...common },
      storeFingerprintForResuming: true,
      removeFingerprintOnSuccess: true,
      onProgress: (sent, total) => onProgress(total ? Math.floor((sent / total) * 100) : 0),
      onSuccess: (payload) => {
        const id = payload.lastResponse.getHeader('X-Sonar-Job-Id');
        if (id) {
          resolve({ id: Number(id) });
          return;
        }
        // The final response was lost: the server remembers which job the upload queued.
        api<{ job: QueuedJob }>(`${upload.url ?? ''}/job`).then((r) => resolve(r.job), reject);
      },
      onError: (err) => reject(new Error(uploadError(err))),
    });
    upload.findPreviousUploads().then((previous) => {
      const last = previous[0];
      if (last) upload.resumeFromPreviousUpload(last);
      upload.start();
    }, reject);
  });
}

function settings(): Record<string, string> {
  const data = new FormData(form);
  const common: Record<string, string> = {};
  for (const key of ['source_label', 'source_note', 'model', 'language', 'analysis_language', 'translation_target_languages']) {
    const value = data.get(key);
    if (typeof value === 'string' && value.trim()) common[key] = value.trim();
  }
  if (data.get('disable_diarization')) common.disable_diarization = '1';
  // "Speakers": only the inputs of the chosen mode are sent (as the no-script form's are read).
  const mode = data.get('speakers');
  const counts = mode === 'exact' ? ['num_speakers'] : mode === 'between' ? ['min_speakers', 'max_speakers'] : [];
  for (const key of counts) {
    const value = data.get(key);
    if (typeof value === 'string' && value.trim()) common[key] = value.trim();
  }
  return common;
}

function report(text: string, job?: QueuedJob, failed = false) {
  const li = el('li', { className: failed ? 'error' : '' });
  if (job) {
    const a = el('a', { text });
    a.href = `/speech/jobs/${job.id}`;
    li.append(a);
  } else li.textContent = text;
  results.append(li);
}

form.addEventListener('submit', (event) => {
  const files = [...(fileInput.files ?? [])];
  // A URL without files: the no-script form post does exactly that.
  if (files.length === 0) return;
  event.preventDefault();
  void submitFiles(files);
});

async function submitFiles(files: File[]) {
  const common = settings();
  const queued: QueuedJob[] = [];
  results.replaceChildren();
  for (const [i, file] of files.entries()) {
    const label = files.length > 1 ? `${file.name} (${i + 1} of ${files.length})` : file.name;
    try {
      // A title given in the form names every job of the batch; numbered when there are several.
      const own = common.source_label && files.length > 1 ? { ...common, source_label: `${common.source_label} (${i + 1})` } : common;
      const job = await uploadFile(file, own, (percent) => (status.textContent = `${label}: ${percent} %`));
      queued.push(job);
      report(`${file.name}: queued`, job);
    } catch (err) {
      report(`${file.name}: ${(err as Error).message}`, undefined, true);
    }
  }
  status.textContent = `${queued.length} of ${files.length} queued.`;
  const only = queued[0];
  if (queued.length === 1 && files.length === 1 && only) window.location.href = `/speech/jobs/${only.id}`;
  // Every file queued: the queue shows them. When one failed the page stays, so its reason stays on
  // screen beside the links to the jobs that were queued.
  else if (queued.length === files.length) window.location.replace('/speech?notice=queued');
}

// Live status of the jobs in the table that are not finished yet.
const TERMINAL = new Set(['completed', 'failed']);
const rows = new Map<number, HTMLTableRowElement>();
for (const row of document.querySelectorAll<HTMLTableRowElement>('#queue-table tbody tr[data-job]')) {
  const badge = row.querySelector<HTMLElement>('.badge');
  if (badge && !TERMINAL.has(badge.dataset.status ?? '')) rows.set(Number(row.dataset.job), row);
}
/** The Stage column says what the Status column does not (empty when the stage is the status). */
function stageText(stage: string | null, status: string): string {
  return stage && stage !== status ? stage : '';
}

if (rows.size) {
  const socket = connectLive([...rows.keys()]);
  socket.on('status', (st) => {
    const row = rows.get(st.job_id);
    const badge = row?.querySelector<HTMLElement>('.badge');
    if (!row || !badge) return;
    badge.textContent = st.status_label;
    badge.dataset.status = st.status;
    const stage = row.querySelector<HTMLElement>('[data-stage]');
    if (stage) stage.textContent = stageText(st.stage_label, st.status_label);
  });
  socket.on('snapshot', (snap) => {
    const row = rows.get(snap.job_id);
    const stage = row?.querySelector<HTMLElement>('[data-stage]');
    if (stage) stage.textContent = stageText(snap.stage_label, row?.querySelector<HTMLElement>('.badge')?.textContent ?? '');
  });
}
