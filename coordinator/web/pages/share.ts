import { byIdAs } from '../lib/dom.js';
import { ReadingView, bindSearch } from '../lib/reading.js';
import { bindPlayer } from '../lib/player.js';

/**
 * The share page's full view (`/shared/speech/transcript/{token}?full`): the job page's reading
 * view, read-only: search inside the transcript, and the player when the owner allows playback.
 */
const view = new ReadingView(byIdAs('segments', HTMLDivElement));
bindSearch(view);
bindPlayer(view);
