import type * as Msal from '@azure/msal-node';

let loading: Promise<typeof Msal> | null = null;

/**
 * `@azure/msal-node`, loaded on first use: only the assistant's sign-in and token paths need it,
 * and loaded at start it held several megabytes of every coordinator's memory.
 */
export function loadMsal(): Promise<typeof Msal> {
  return (loading ??= import('@azure/msal-node'));
}
