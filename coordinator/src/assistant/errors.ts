/** A connector error: HTTP status, machine code and what the caller can do (reconnect or consent link, missing scopes). */
export class AssistantError extends Error {
  constructor(
    readonly status: 401 | 403 | 404 | 409 | 422 | 429 | 502 | 503,
    readonly code: string,
    message: string,
    readonly extra: {
      reconnect_url?: string;
      consent_url?: string;
      missing_scopes?: string[];
      identity_provider_code?: string;
      action?: string;
      retry_after?: number;
      errors?: Record<string, string[]>;
    } = {},
  ) {
    super(message);
    this.name = 'AssistantError';
  }
}
