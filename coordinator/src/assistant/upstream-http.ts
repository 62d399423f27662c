import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import type { INetworkModule, NetworkResponse } from '@azure/msal-node';
import { Agent, request } from 'undici';

/** The upstream did not answer in time, or could not be reached at all. */
export class UpstreamUnreachable extends Error {
  constructor(
    readonly kind: 'timeout' | 'connect',
    message: string,
  ) {
    super(message);
    this.name = 'UpstreamUnreachable';
  }
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
}

/** Largest upstream body read (a runaway answer is cut off and then fails to parse: 502). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * HTTPS towards the identity provider and the graph API: Node's default CA list plus the PEM file
 * of ASSISTANT_EXTRA_CA_FILE (certificate verification is never turned off), and one timeout for
 * the whole exchange (connect, headers and body).
 */
export class UpstreamHttp {
  private readonly dispatcher: Agent;

  constructor(
    private readonly timeoutMs: number,
    extraCaFile?: string,
  ) {
    const ca = extraCaFile ? [...rootCertificates, readFileSync(extraCaFile, 'utf8')] : undefined;
    this.dispatcher = new Agent({ connect: ca ? { ca } : {}, connectTimeout: Math.min(timeoutMs, 10_000), headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  }

  async send(url: string, init: { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: string }): Promise<UpstreamResponse> {
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      const res = await request(url, { method: init.method, headers: init.headers ?? {}, body: init.body ?? null, dispatcher: this.dispatcher, signal });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        const b = chunk as Buffer;
        size += b.length;
        if (size > MAX_BODY_BYTES) {
          res.body.destroy();
          break;
        }
        chunks.push(b);
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
      return { status: res.statusCode, headers, text: Buffer.concat(chunks).toString('utf8') };
    } catch (err) {
      const e = err as { name?: string; code?: string };
      if (
        signal.aborted ||
        e.name === 'TimeoutError' ||
        e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
        e.code === 'UND_ERR_BODY_TIMEOUT' ||
        e.code === 'UND_ERR_CONNECT_TIMEOUT'
      ) {
        throw new UpstreamUnreachable('timeout', `no answer within ${Math.round(this.timeoutMs / 1000)} s`);
      }
      throw new UpstreamUnreachable('connect', `could not be reached (${e.code ?? e.name ?? 'error'})`);
    }
  }

  /** MSAL's network client: the same trust and timeout. Bodies are JSON (MSAL reads error bodies too). */
  msalNetworkModule(): INetworkModule {
    const call = async <T>(url: string, method: 'GET' | 'POST', options?: { headers?: Record<string, string>; body?: string }): Promise<NetworkResponse<T>> => {
      const res = await this.send(url, { method, headers: options?.headers ?? {}, ...(options?.body !== undefined ? { body: options.body } : {}) });
      let body: T;
      try {
        body = JSON.parse(res.text) as T;
      } catch {
        throw new UpstreamUnreachable('connect', `the identity provider answered ${res.status} without JSON`);
      }
      return { status: res.status, headers: res.headers, body };
    };
    return {
      sendGetRequestAsync: (url, options) => call(url, 'GET', options),
      sendPostRequestAsync: (url, options) => call(url, 'POST', options),
    };
  }

  close() {
    return this.dispatcher.close();
  }
}
