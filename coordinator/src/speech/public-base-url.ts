/** True for base URLs that only this host can reach (links built from them are useless to others). */
export function isLocalBaseUrl(base: string): boolean {
  try {
    const host = new URL(base).hostname.replace(/^\[|\]$/g, '').toLowerCase();
    return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || host === '0.0.0.0' || /^127\./.test(host);
  } catch {
    return true;
  }
}

/**
 * Why a terminal callback cannot be sent from this coordinator, or null when it can: a callback
 * carries `job_url` (and `share_url`) under PUBLIC_BASE_URL, and a local-only base URL (unset, so
 * `http://localhost:$PORT`, or a loopback address) would hand the receiver a link that points
 * nowhere. Job creation and re-transcription refuse such a callback (422 under
 * `errors.callback_url`); a delivery that meets it anyway is not sent.
 */
export function callbackBaseUrlProblem(publicBaseUrl: string): string | null {
  if (!isLocalBaseUrl(publicBaseUrl)) return null;
  return (
    `a callback carries a job_url under PUBLIC_BASE_URL, which is unset or local-only here (${publicBaseUrl}): ` +
    'the operator must set PUBLIC_BASE_URL to the URL other hosts reach this coordinator at'
  );
}
