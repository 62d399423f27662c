/** How a zone is served by an external DNS provider (resolved per request by ProviderDirectory). */
export interface ProviderBinding {
  /** Provider key (`cloudflare`). */
  provider: 'cloudflare';
  /** Human-readable provider name. */
  label: string;
  /**
   * `mapping`: a `dns_provider_zones` row; `imported`: the older host-side provider config
   * (DNS_PROVIDER_LEGACY_FILE or the CLOUDFLARE_ZONE_ID environment), not saved as a row yet;
   * `detected`: no row, but the zone's authoritative NS set is entirely the provider's name servers.
   */
  source: 'mapping' | 'imported' | 'detected';
  /** The zone's id at the provider; null when it could not be found with the token. */
  providerZoneId: string | null;
  /** Where the API token is read from (`env:NAME`, `file:/path`, `file:/path#KEY`). */
  tokenRef: string;
  /** The provider path can be used: the token reference resolves and the zone id is known. */
  ready: boolean;
  /** Why it is not ready. */
  problem?: string;
}

export const PROVIDERS = { cloudflare: { label: 'Cloudflare', method: 'CLOUDFLARE' } } as const;
export type ProviderKey = keyof typeof PROVIDERS;
