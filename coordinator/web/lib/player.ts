import WaveSurfer from 'wavesurfer.js';
import RegionsPlugin from 'wavesurfer.js/dist/plugins/regions.esm.js';
import { ReadingView } from './reading.js';

/**
 * The player tied to the words (job page and share page): the page's own <audio>/<video> element
 * plays the retained media; this module seeks it from a click on a word, a segment or a turn's
 * timestamp, highlights the word being spoken and keeps it in view (unless "Follow the words" is
 * off), and adds the keyboard (space, ←/→ 5 s, < > speed) and the speed control. The waveform is
 * wavesurfer.js drawing the coordinator's peaks (the browser never decodes the file), with the
 * speaker turns as regions in the speakers' colours.
 *
 * The highlight moves on a timer set for the next word's start while playing; each move costs a
 * binary search over the segments' start times plus a walk over one segment's words, and touches
 * only the segment whose state changes and the word's highlight range.
 */

/** The lower part of the window the spoken word does not go into while followed. */
const FOLLOW_MARGIN = 0.4;

export interface Player {
  destroy(): void;
}

export function bindPlayer(view: ReadingView): Player | null {
  const box = document.getElementById('player');
  const found = document.getElementById('media');
  if (!box || !(found instanceof HTMLMediaElement)) return null;
  const media: HTMLMediaElement = found;
  view.root.dataset.player = '1';
  const controls = document.getElementById('player-controls');
  if (controls) controls.hidden = false;
  const speed = document.getElementById('speed') as HTMLSelectElement | null;
  const follow = document.getElementById('follow') as HTMLInputElement | null;
  const abort = new AbortController();
  const on = { signal: abort.signal };

  // ---- seeking from the text ----
  const seek = (t: number) => {
    if (!Number.isFinite(t)) return;
    media.currentTime = Math.max(0, t);
    paint(true);
  };
  view.root.addEventListener(
    'click',
    (ev) => {
      const target = ev.target instanceof Element ? ev.target : null;
      if (!target || window.getSelection()?.toString()) return; // selecting text is not a seek
      const ts = target.closest<HTMLElement>('.ts');
      if (ts) {
        ev.preventDefault();
        seek(Number(ts.dataset.t));
        return;
      }
      const seg = target.closest<HTMLElement>('.seg');
      if (!seg) return;
      // The word under the pointer: its start (the text has no element per word).
      const index = wordIndexAtPoint(seg, ev.clientX, ev.clientY);
      seek(index === null ? Number(seg.dataset.start) : (ReadingView.wordStart(seg, index) ?? Number(seg.dataset.start)));
    },
    on,
  );

  // ---- the highlight ----
  // The segment being spoken gets `.now`; its word is painted with the CSS Custom Highlight API
  // (`::highlight(transcript-word)`), so the text is never rewritten and nothing else restyles.
  const highlights = typeof CSS !== 'undefined' && 'highlights' in CSS;
  const wordMark = highlights ? new Highlight() : null;
  if (wordMark) CSS.highlights.set('transcript-word', wordMark);
  let nowSeg: HTMLElement | null = null;
  let nowWord = -1;
  let timer = 0;
  /** The band of the window the spoken word stays in: under the sticky player, above the lower third. */
  const band = () => {
    const top = Math.max(0, document.querySelector('.reading-head')?.getBoundingClientRect().bottom ?? 0);
    return { top, bottom: top + (window.innerHeight - top) * (1 - FOLLOW_MARGIN) };
  };
  function paint(force = false) {
    const t = media.currentTime;
    const seg = view.segmentAt(t);
    const word = seg ? ReadingView.wordAt(seg, t) : null;
    const index = word?.index ?? -1;
    if (seg === nowSeg && index === nowWord && !force) return;
    if (seg !== nowSeg) {
      nowSeg?.classList.remove('now');
      seg?.classList.add('now');
      nowSeg = seg;
    }
    nowWord = index;
    const range = seg && word ? ReadingView.wordRange(seg, word.index) : null;
    wordMark?.clear();
    if (range) wordMark?.add(range);
    // What is highlighted, for whoever reads the page (and its tests): the word and its start.
    view.root.dataset.nowWord = range ? range.toString() : '';
    view.root.dataset.nowT = word ? word.start.toFixed(2) : seg ? (seg.dataset.start ?? '') : '';
    if (!seg) return;
    // A seek brings the word into view; playing keeps it in the band while "Follow the words" is
    // on, a few lines at a time (each scroll lays out only the text it brings in).
    if (force || follow?.checked !== false) {
      const box = range?.getBoundingClientRect() ?? seg.getBoundingClientRect();
      const { top, bottom } = band();
      if (box.top < top || box.bottom > bottom) {
        const far = box.bottom < top - window.innerHeight || box.top > window.innerHeight * 2;
        if (far) seg.scrollIntoView({ block: 'center', behavior: 'auto' });
        else window.scrollBy(0, box.top - (top + (bottom - top) * 0.3));
      }
    }
  }
  // While playing, the highlight moves when the next word starts: a timer set for that moment (at
  // most 250 ms away), not a callback on every animation frame, so a page whose words do not
  // change draws nothing new.
  const tick = () => {
    clearTimeout(timer);
    timer = 0;
    paint();
    if (media.paused) return;
    const next = view.nextBoundary(media.currentTime);
    const wait = next === null ? 250 : ((next - media.currentTime) / (media.playbackRate || 1)) * 1000;
    timer = window.setTimeout(tick, Math.max(10, Math.min(250, wait + 5)));
  };
  media.addEventListener('play', tick, on);
  media.addEventListener('seeked', tick, on);
  media.addEventListener('ratechange', tick, on);
  media.addEventListener('timeupdate', () => timer || paint(), on);

  // ---- speed and keyboard ----
  const speeds = speed ? [...speed.options].map((o) => Number(o.value)) : [0.75, 1, 1.25, 1.5, 1.75, 2];
  const setSpeed = (rate: number) => {
    media.playbackRate = rate;
    if (speed) speed.value = String(rate);
  };
  speed?.addEventListener('change', () => setSpeed(Number(speed.value)), on);
  document.addEventListener(
    'keydown',
    (ev) => {
      if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      const t = ev.target;
      if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement || t instanceof HTMLButtonElement) return;
      if (t instanceof HTMLElement && (t.isContentEditable || t === media)) return;
      if (ev.key === ' ') {
        ev.preventDefault();
        if (media.paused) void media.play();
        else media.pause();
      } else if (ev.key === 'ArrowLeft' || ev.key === 'ArrowRight') {
        ev.preventDefault();
        seek(media.currentTime + (ev.key === 'ArrowLeft' ? -5 : 5));
      } else if (ev.key === '<' || ev.key === '>') {
        const i = speeds.indexOf(media.playbackRate);
        const next = speeds[Math.max(0, Math.min(speeds.length - 1, (i < 0 ? speeds.indexOf(1) : i) + (ev.key === '<' ? -1 : 1)))];
        if (next !== undefined) setSpeed(next);
      }
    },
    on,
  );

  // ---- the waveform ----
  let surfer: WaveSurfer | null = null;
  const waveform = document.getElementById('waveform');
  const peaksUrl = box.dataset.peaks;
  if (waveform && peaksUrl) {
    void fetch(peaksUrl, { headers: { accept: 'application/json' }, credentials: 'same-origin' })
      .then((res) => (res.ok ? (res.json() as Promise<{ peaks: number[]; duration: number }>) : null))
      .then((data) => {
        if (!data || abort.signal.aborted) return;
        const regions = RegionsPlugin.create();
        const styles = getComputedStyle(waveform);
        // The waveform is not bound to the media element: bound, wavesurfer redraws its progress on
        // every animation frame while playing, which on a phone costs more than the whole page. It
        // follows the media's own timeupdate (a few times a second) and seeks it on a click instead.
        const waves = WaveSurfer.create({
          container: waveform,
          peaks: [data.peaks],
          duration: data.duration,
          height: Number.parseInt(styles.getPropertyValue('--wave-height'), 10) || 56,
          waveColor: styles.getPropertyValue('--wave') || '#9aa3b2',
          progressColor: styles.getPropertyValue('--wave-progress') || '#2456c8',
          cursorColor: styles.getPropertyValue('--wave-cursor') || '#c2410c',
          barWidth: 2,
          barGap: 1,
          normalize: true,
          cspNonce: document.querySelector<HTMLElement>('.reading-head')?.nonce ?? '',
          plugins: [regions],
        });
        surfer = waves;
        const track = () => waves.setTime(media.currentTime);
        media.addEventListener('timeupdate', track, on);
        media.addEventListener('seeked', track, on);
        waves.on('interaction', (t) => seek(t));
        waves.once('ready', () => {
          for (const turn of speakerTurns(view.root)) regions.addRegion({ ...turn, drag: false, resize: false });
          track();
          waveform.dataset.ready = '1';
        });
      })
      .catch(() => undefined); // no waveform: the player plays all the same
  }

  return {
    destroy() {
      abort.abort();
      clearTimeout(timer);
      surfer?.destroy();
      if (highlights) CSS.highlights.delete('transcript-word');
    },
  };
}

/**
 * The speaker turns of the transcript as waveform regions, each in its speaker's colour:
 * consecutive turns of one speaker merged, and at most MAX_REGIONS of them (a turn shorter than the
 * waveform can show joins the region before it), so a long recording does not draw a thousand
 * elements into a strip a few hundred pixels wide.
 */
const MAX_REGIONS = 240;
function speakerTurns(root: HTMLElement): Array<{ start: number; end: number; color: string }> {
  const out: Array<{ start: number; end: number; color: string; speaker: string }> = [];
  const colours = new Map<string, string>();
  for (const p of root.querySelectorAll<HTMLElement>('.turn')) {
    const speaker = p.dataset.speaker ?? '';
    if (!speaker) continue;
    const segs = p.querySelectorAll<HTMLElement>('.seg');
    const start = Number(segs[0]?.dataset.start);
    const end = Number(segs[segs.length - 1]?.dataset.end);
    if (!Number.isFinite(start) || !Number.isFinite(end)) continue;
    let colour = colours.get(speaker);
    if (!colour) {
      colour = getComputedStyle(p).getPropertyValue('--spk').trim() || '#888888';
      colours.set(speaker, colour);
    }
    const last = out.at(-1);
    if (last && last.speaker === speaker && start - last.end < 1) last.end = end;
    else out.push({ start, end, color: colour, speaker });
  }
  const total = (out.at(-1)?.end ?? 0) - (out[0]?.start ?? 0);
  const shortest = out.length > MAX_REGIONS ? total / MAX_REGIONS : 0;
  const shown: typeof out = [];
  for (const r of out) {
    const last = shown.at(-1);
    if (last && (r.end - r.start < shortest || last.speaker === r.speaker)) last.end = r.end;
    else shown.push({ ...r });
  }
  return shown.map(({ start, end, color }) => ({ start, end, color: `color-mix(in srgb, ${color} 28%, transparent)` }));
}

/** The index of the word of `seg` under the point (x, y), from the caret there; null when none. */
function wordIndexAtPoint(seg: HTMLElement, x: number, y: number): number | null {
  const caret = document.caretPositionFromPoint(x, y);
  return caret && seg.contains(caret.offsetNode) ? ReadingView.wordIndexAt(seg, caret.offset) : null;
}
