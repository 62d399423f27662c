#!/bin/sh
# certbot manual DNS-01 hook for the DNS API's ACME helpers. Use the same script for both hooks:
#   SONAR_URL=https://sonar.example.org SONAR_DNS_API_KEY=sonar_dns_... \
#   certbot certonly --manual --preferred-challenges dns \
#     --manual-auth-hook /path/certbot-dns-hook.sh --manual-cleanup-hook /path/certbot-dns-hook.sh -d example.org
# certbot sets CERTBOT_DOMAIN and CERTBOT_VALIDATION for both, and CERTBOT_AUTH_OUTPUT only for the
# cleanup hook, which is how the script tells them apart. The API answers once BIND has the record
# (it reads it back), so no sleep is needed before certbot asks the CA to validate.
set -eu
: "${SONAR_URL:?set SONAR_URL to the service address}"
: "${SONAR_DNS_API_KEY:?set SONAR_DNS_API_KEY to a DNS API key with write access to the zone}"
: "${CERTBOT_DOMAIN:?run me from certbot}"
: "${CERTBOT_VALIDATION:?run me from certbot}"
# Host names and base64url values need no JSON escaping; refuse anything else.
case "$CERTBOT_DOMAIN$CERTBOT_VALIDATION" in *[!A-Za-z0-9._*-]*) echo "unexpected characters in domain or validation" >&2; exit 2 ;; esac
if [ -n "${CERTBOT_AUTH_OUTPUT+x}" ]; then action=cleanup; else action=present; fi
curl -fsS -X POST "$SONAR_URL/api/dns/acme/$action" \
  -H "X-API-Key: $SONAR_DNS_API_KEY" -H 'Content-Type: application/json' \
  --data "{\"domain\":\"$CERTBOT_DOMAIN\",\"challenge\":\"$CERTBOT_VALIDATION\"}" >/dev/null
