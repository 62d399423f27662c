import { api } from './api.js';
import { el } from './dom.js';
import { ReadingView } from './reading.js';

/**
 * The owner's editor of the transcript (job page): "Correct" switches it on; a click on a segment
 * then opens a small form under its paragraph to fix the segment's text or move it to another
 * speaker (an existing one or a new one), or, when words of that segment are selected, only those
 * words. Every change goes through the corrections API (PATCH /api/speech/jobs/{id}/segments/{seq},
 * POST …/segments/{seq}/speaker) with the session's CSRF token; the page then shows the corrected
 * text through `onChanged` (the live `changed` event brings it to other tabs as well).
 */
export function bindCorrections(view: ReadingView, jobId: number, onChanged: () => Promise<unknown>) {
  const toggle = document.getElementById('edit-toggle');
  if (!(toggle instanceof HTMLButtonElement)) return;
  let editor: HTMLFormElement | null = null;

  const close = () => {
    editor?.remove();
    editor = null;
    view.root.querySelector('.seg.editing')?.classList.remove('editing');
  };
  toggle.addEventListener('click', () => {
    const on = toggle.getAttribute('aria-pressed') !== 'true';
    toggle.setAttribute('aria-pressed', String(on));
    toggle.textContent = on ? 'Done correcting' : 'Correct';
    if (on) view.root.dataset.editing = '1';
    else {
      delete view.root.dataset.editing;
      close();
    }
  });

  /** The 0-based indexes of the words of `seg` the selection covers, when it lies within that segment (which has word times). */
  const selectedWords = (seg: HTMLElement): [number, number] | null => {
    const selection = window.getSelection();
    if (!selection || selection.isCollapsed || selection.rangeCount === 0 || !seg.dataset.w) return null;
    const range = selection.getRangeAt(0);
    const text = seg.firstChild;
    if (range.startContainer !== text || range.endContainer !== text) return null;
    const from = ReadingView.wordIndexAt(seg, range.startOffset);
    const to = ReadingView.wordIndexAt(seg, Math.max(range.startOffset, range.endOffset - 1));
    return from === null || to === null ? null : [from, to];
  };

  view.root.addEventListener(
    'click',
    (ev) => {
      if (!view.root.dataset.editing) return;
      const seg = ev.target instanceof Element ? ev.target.closest<HTMLElement>('.seg') : null;
      if (!seg || seg.classList.contains('editing')) return;
      ev.stopImmediatePropagation();
      open(seg, selectedWords(seg));
    },
    { capture: true },
  );

  function open(seg: HTMLElement, words: [number, number] | null) {
    close();
    seg.classList.add('editing');
    const seq = Number(seg.dataset.seq);
    const form = el('form', { className: 'seg-editor', data: { seq: String(seq) } });
    form.id = 'seg-editor';
    const text = el('textarea');
    text.id = 'seg-text';
    text.name = 'text';
    text.rows = 3;
    text.value = (seg.textContent ?? '').replace(/\s+/g, ' ').trim();
    const textLabel = el('label', { text: `Text of segment ${seq}` });
    textLabel.htmlFor = 'seg-text';
    const saveText = el('button', { text: 'Save text' });
    saveText.type = 'submit';
    saveText.id = 'seg-save';

    const speaker = el('select');
    speaker.id = 'seg-speaker';
    for (const s of view.speakers()) {
      const option = el('option', { text: s.name });
      option.value = s.key;
      option.selected = s.key === seg.dataset.speaker;
      speaker.append(option);
    }
    const fresh = el('option', { text: 'A new speaker…' });
    fresh.value = 'new';
    speaker.append(fresh);
    const speakerLabel = el('label', {
      text: words ? `Move words ${words[0] + 1}–${words[1] + 1} (“${selectionText(seg, words)}”) to` : 'Move the segment to',
    });
    speakerLabel.htmlFor = 'seg-speaker';
    const newName = el('input');
    newName.id = 'seg-new-name';
    newName.placeholder = 'Name of the new speaker (optional)';
    newName.maxLength = 60;
    newName.hidden = true;
    speaker.addEventListener('change', () => (newName.hidden = speaker.value !== 'new'));
    const move = el('button', { className: 'secondary', text: 'Move' });
    move.type = 'button';
    move.id = 'seg-move';
    const cancel = el('button', { className: 'secondary', text: 'Cancel' });
    cancel.type = 'button';
    const status = el('p', { className: 'muted' });
    status.id = 'seg-status';
    status.setAttribute('role', 'status');
    form.append(textLabel, text, saveText, speakerLabel, speaker, newName, move, cancel, status);
    seg.closest('.turn')?.after(form);
    editor = form;
    text.focus({ preventScroll: true });

    const run = async (work: () => Promise<unknown>) => {
      status.textContent = 'Saving…';
      try {
        await work();
        close();
        await onChanged();
      } catch (e) {
        status.textContent = e instanceof Error ? e.message : String(e);
        status.className = 'error';
      }
    };
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void run(() => api(`/api/speech/jobs/${jobId}/segments/${seq}`, { method: 'PATCH', body: { text: text.value } }));
    });
    move.addEventListener('click', () => {
      const body: Record<string, unknown> = { speaker: speaker.value };
      if (speaker.value === 'new' && newName.value.trim()) body.name = newName.value.trim();
      if (words) Object.assign(body, { from_word: words[0], to_word: words[1] });
      void run(() => api(`/api/speech/jobs/${jobId}/segments/${seq}/speaker`, { method: 'POST', body }));
    });
    cancel.addEventListener('click', close);
  }
}

function selectionText(seg: HTMLElement, [from, to]: [number, number]): string {
  return (seg.textContent ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .slice(from, to + 1)
    .join(' ');
}
