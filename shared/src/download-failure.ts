/**
 * Why a source URL could not be downloaded, in words for the job page, with the technical code
 * kept apart for the runtime log. Used by the coordinator's staging and by the worker's own
 * download, so a job fails with the same sentence whichever of them fetched the source.
 */
export interface DownloadFailure {
  /** For people, after "Could not download the source: ": "the server media.example.org was not found…". */
  message: string;
  /** The code or raw text underneath (ENOTFOUND, ECONNREFUSED, bad port, HTTP 404). */
  code: string;
}

const hostOf = (url: string): string => {
  try {
    return new URL(url).host || url;
  } catch {
    return url;
  }
};

/** The error code (or message) under fetch's bare "fetch failed" TypeError, or of the error itself. */
function technical(err: unknown): { code: string; message: string; name: string; hostname: string | undefined } {
  type Raw = { name?: string; code?: string; message?: string; hostname?: string };
  const e = err as (Raw & { cause?: Raw }) | null;
  const cause = e?.cause && typeof e.cause === 'object' ? e.cause : null;
  return {
    hostname: cause?.hostname ?? e?.hostname,
    code: cause?.code ?? e?.code ?? '',
    message: cause?.message ?? e?.message ?? String(err),
    name: cause?.name ?? e?.name ?? '',
  };
}

const HTTP_REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  410: 'Gone',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** An HTTP answer that is not a success, as a sentence. */
export function httpDownloadFailure(url: string, status: number): DownloadFailure {
  const host = hostOf(url);
  const code = `HTTP ${status}${HTTP_REASONS[status] ? ` ${HTTP_REASONS[status]}` : ''}`;
  let message: string;
  if (status === 404 || status === 410) message = `there is nothing at this address (${host} answered ${code})`;
  else if (status === 401 || status === 403) message = `${host} refused it (${code}); the file may need a sign-in or be private`;
  else if (status === 429) message = `${host} is limiting requests (${code}); try again later`;
  else if (status >= 500) message = `${host} had a problem of its own (${code}); try again later`;
  else message = `${host} did not send the file (it answered ${code})`;
  return { message, code };
}

/** A failed connection or fetch (DNS, refused, timed out, blocked port, TLS), as a sentence. */
export function fetchDownloadFailure(url: string, err: unknown): DownloadFailure {
  const t = technical(err);
  // A redirect may have led elsewhere: the name the resolver could not find is the one to show.
  const host = t.hostname ?? hostOf(url);
  const code = t.code || t.message;
  const say = (message: string): DownloadFailure => ({ message, code });
  if (
    t.name === 'TimeoutError' ||
    t.name === 'AbortError' ||
    t.code === 'ETIMEDOUT' ||
    t.code === 'UND_ERR_CONNECT_TIMEOUT' ||
    t.code === 'UND_ERR_HEADERS_TIMEOUT'
  )
    return say(`${host} did not answer in time; the server may be down or slow, try again later`);
  if (t.code === 'ENOTFOUND' || t.code === 'EAI_AGAIN' || t.code === 'EAI_NONAME')
    return say(`the server ${host} was not found; check the address for typing mistakes`);
  if (t.code === 'ECONNREFUSED') return say(`${host} refused the connection; nothing answers at that address and port`);
  if (t.code === 'ECONNRESET' || t.code === 'EPIPE' || t.code === 'UND_ERR_SOCKET')
    return say(`the connection to ${host} broke off during the download; try again`);
  if (t.code === 'EHOSTUNREACH' || t.code === 'ENETUNREACH') return say(`${host} cannot be reached from this server's network`);
  if (/bad port/i.test(t.message)) {
    let port = '';
    try {
      port = new URL(url).port;
    } catch {
      // the host is enough
    }
    return say(`port ${port || 'of this address'} is not allowed for web downloads (it belongs to another protocol)`);
  }
  if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY/i.test(t.code || t.message))
    return say(`the secure connection to ${host} failed: its certificate is not valid for this address`);
  return say(`the download from ${host} failed`);
}

/** A source (downloaded or uploaded) that is not audio or video anything here can read. */
export function notMediaFailure(detail: string): DownloadFailure {
  return { message: 'it is not audio or video that can be transcribed', code: detail };
}
