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
 * The highlight runs on requestAnimationFrame while playing and costs a binary search over the
 * segments' start times plus a walk over one segment's words; only the spans whose state changes
 * are touched, so a three-hour transcript plays without long tasks.
 */

const FOLLOW_MARGIN = 0.25;

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
      const word = target.closest<HTMLElement>('.w');
      const seg = target.closest<HTMLElement>('.seg');
      const at = ts?.dataset.t ?? word?.dataset.t ?? seg?.dataset.start;
      if (at === undefined) return;
      if (ts) ev.preventDefault();
      seek(Number(at));
    },
    on,
  );

  // ---- the highlight ----
  let nowSeg: HTMLElement | null = null;
  let nowWord: HTMLElement | null = null;
  let frame = 0;
  const inView = (el: HTMLElement) => {
    const r = el.getBoundingClientRect();
    const head = document.querySelector('.reading-head')?.getBoundingClientRect().bottom ?? 0;
    return r.top >= Math.max(0, head) && r.bottom <= window.innerHeight * (1 - FOLLOW_MARGIN);
  };
  function paint(force = false) {
    const t = media.currentTime;
    const seg = view.segmentAt(t);
    const word = seg ? ReadingView.wordAt(seg, t) : null;
    if (seg === nowSeg && word === nowWord && !force) return;
    if (seg !== nowSeg) {
      nowSeg?.classList.remove('now');
      seg?.classList.add('now');
      nowSeg = seg;
    }
    if (word !== nowWord) {
      nowWord?.classList.remove('now');
      word?.classList.add('now');
      nowWord = word;
    }
    const focus = word ?? seg;
    // A seek brings the word into view; playing keeps it there while "Follow the words" is on.
    if (focus && (force || follow?.checked !== false) && !inView(focus)) focus.scrollIntoView({ block: 'center', behavior: 'auto' });
  }
  const loop = () => {
    paint();
    frame = media.paused ? 0 : requestAnimationFrame(loop);
  };
  media.addEventListener('play', () => (frame ||= requestAnimationFrame(loop)), on);
  media.addEventListener('seeked', () => paint(), on);
  media.addEventListener('timeupdate', () => frame || paint(), on);

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
        surfer = WaveSurfer.create({
          container: waveform,
          media,
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
        surfer.once('ready', () => {
          for (const turn of speakerTurns(view.root)) regions.addRegion({ ...turn, drag: false, resize: false });
          waveform.dataset.ready = '1';
        });
      })
      .catch(() => undefined); // no waveform: the player plays all the same
  }

  return {
    destroy() {
      abort.abort();
      cancelAnimationFrame(frame);
      surfer?.destroy();
    },
  };
}

/** The speaker turns of the transcript as waveform regions: consecutive turns of one speaker merged, each in its speaker's colour. */
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
  return out.map(({ start, end, color }) => ({ start, end, color: `color-mix(in srgb, ${color} 28%, transparent)` }));
}
