/**
 * What the quick start found missing for its local worker agent (ffmpeg, pocketsphinx, the en-us
 * model), as one sentence with the install command; null when nothing is missing or when no local
 * worker is started by this process. The quick start sets it before the coordinator starts; the
 * banner, the /speech page and GET /api/speech/status show the same sentence.
 */
let problem: string | null = null;

export function setLocalWorkerProblem(sentence: string | null): void {
  problem = sentence;
}

export function localWorkerProblem(): string | null {
  return problem;
}
