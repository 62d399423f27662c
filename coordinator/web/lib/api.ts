import { csrfToken } from './dom.js';

/** An API answer that was not ok: the service's message (`{ok:false, message}`) or the HTTP status, its reason and field errors. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly reason?: string,
    readonly errors: Record<string, string[]> = {},
  ) {
    super(message);
  }
}

/** JSON from the session API (same origin; the CSRF header on changes). */
export async function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (init.method && init.method !== 'GET') headers['x-csrf-token'] = csrfToken();
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method: init.method ?? 'GET',
    headers,
    credentials: 'same-origin',
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
  const json = (await res.json().catch(() => null)) as { message?: string; reason?: string; errors?: Record<string, string[]> } | null;
  if (!res.ok) throw new ApiError(json?.message ?? `HTTP ${res.status}`, res.status, json?.reason, json?.errors ?? {});
  return json as T;
}
