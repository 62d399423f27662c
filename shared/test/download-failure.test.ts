import { describe, expect, it } from 'vitest';
import { fetchDownloadFailure, httpDownloadFailure, notMediaFailure } from '../src/download-failure.js';

/** fetch's bare TypeError with the system error underneath, as undici throws it. */
const fetchFailed = (cause: Record<string, unknown>) => Object.assign(new TypeError('fetch failed'), { cause });

describe('download failures in words', () => {
  const url = 'https://media.example.org:8443/talk.mp3';

  it('says what went wrong and keeps the code apart', () => {
    expect(fetchDownloadFailure(url, fetchFailed({ code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND media.example.org' }))).toEqual({
      message: 'the server media.example.org:8443 was not found; check the address for typing mistakes',
      code: 'ENOTFOUND',
    });
    expect(fetchDownloadFailure(url, fetchFailed({ code: 'ECONNREFUSED' })).message).toBe(
      'media.example.org:8443 refused the connection; nothing answers at that address and port',
    );
    expect(fetchDownloadFailure(url, fetchFailed({ code: 'UND_ERR_CONNECT_TIMEOUT' })).message).toMatch(/did not answer in time/);
    expect(fetchDownloadFailure(url, Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' })).message).toMatch(
      /did not answer in time/,
    );
    expect(fetchDownloadFailure('http://example.org:6000/a.mp3', fetchFailed({ message: 'bad port' }))).toEqual({
      message: 'port 6000 is not allowed for web downloads (it belongs to another protocol)',
      code: 'bad port',
    });
    expect(fetchDownloadFailure(url, fetchFailed({ code: 'CERT_HAS_EXPIRED' })).message).toMatch(/certificate is not valid/);
    expect(fetchDownloadFailure(url, fetchFailed({ code: 'EWHATEVER' }))).toEqual({
      message: 'the download from media.example.org:8443 failed',
      code: 'EWHATEVER',
    });
  });

  it('names the HTTP status and what it likely means', () => {
    expect(httpDownloadFailure(url, 404)).toEqual({
      message: 'there is nothing at this address (media.example.org:8443 answered HTTP 404 Not Found)',
      code: 'HTTP 404 Not Found',
    });
    expect(httpDownloadFailure(url, 403).message).toMatch(/sign-in or be private/);
    expect(httpDownloadFailure(url, 503).message).toMatch(/problem of its own \(HTTP 503 Service Unavailable\); try again later/);
    expect(httpDownloadFailure(url, 418)).toEqual({ message: 'media.example.org:8443 did not send the file (it answered HTTP 418)', code: 'HTTP 418' });
    expect(notMediaFailure('Invalid data found when processing input').message).toBe('it is not audio or video that can be transcribed');
  });
});
