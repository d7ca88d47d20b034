# shellcheck shell=bash
# A second, dedicated Apache Pulsar standalone (start_pulsar of pulsar.sh with more settings) that
# requires token authentication (AuthenticationProviderToken, HS256 with a secret key of its own)
# on every port, serves TLS, and enforces authorization. Sourced by scripts/services.sh; defines
# start_pulsar_secure, stop_pulsar_secure, restart_pulsar_secure and print_pulsar_secure_env.
#
# Everything secret is made here, at start time, under PULSAR_SECURE_DIR (never committed):
#   tls/ca.pem, tls/untrusted-ca.pem, tls/server.pem/.key   make_test_certs (tls.sh)
#   secrets/token-secret.key  the HS256 key (32 random bytes) the broker validates tokens with;
#                             tests sign their own tokens with it (kept across restarts)
#   secrets/admin.token       a token of the super user role "admin", made from the key at every
#                             start, used by the broker's own admin client and by this script
# Roles (a token's "sub") and what they may do:
#   admin     super user
#   relay     produce on namespace secure/granted (nothing on secure/refused)
#   consumer  consume on secure/granted and secure/refused
#
# Ports, all on 127.0.0.1: PULSAR_SECURE_TLS_PORT (6651, pulsar+ssl://), PULSAR_SECURE_HTTPS_PORT
# (8443, admin REST over TLS), PULSAR_SECURE_PORT (6660) and PULSAR_SECURE_HTTP_PORT (8090),
# plaintext but token-only (the standalone's own admin client, readiness), and
# PULSAR_SECURE_BOOKIE_PORT (3191). Starting is idempotent and serialized by a lock file, so
# concurrent test packages may call it.

: "${PULSAR_SECURE_PORT:=6660}"
: "${PULSAR_SECURE_HTTP_PORT:=8090}"
: "${PULSAR_SECURE_TLS_PORT:=6651}"
: "${PULSAR_SECURE_HTTPS_PORT:=8443}"
: "${PULSAR_SECURE_BOOKIE_PORT:=3191}"
: "${PULSAR_SECURE_DIR:=$SERVICES_STATE_DIR/pulsar-secure}"

# _pulsar_secure_b64url: base64url without padding of stdin (JWT encoding).
_pulsar_secure_b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }

# _pulsar_secure_token ROLE: an HS256 JWT {"sub": ROLE} without expiry, signed with the key.
_pulsar_secure_token() {
  local key=$PULSAR_SECURE_DIR/secrets/token-secret.key head payload sig
  head=$(printf '{"alg":"HS256","typ":"JWT"}' | _pulsar_secure_b64url)
  payload=$(printf '{"sub":"%s"}' "$1" | _pulsar_secure_b64url)
  sig=$(printf '%s.%s' "$head" "$payload" |
    openssl dgst -sha256 -mac HMAC -macopt "hexkey:$(xxd -p -c 256 "$key")" -binary | _pulsar_secure_b64url)
  printf '%s.%s.%s' "$head" "$payload" "$sig"
}

# _pulsar_secure_secrets: the secret key (once) and the admin token (every start), mode 0600.
_pulsar_secure_secrets() {
  local dir=$PULSAR_SECURE_DIR/secrets
  mkdir -p "$dir" && chmod 700 "$dir"
  (
    umask 077
    [ -s "$dir/token-secret.key" ] || openssl rand -out "$dir/token-secret.key" 32
    _pulsar_secure_token admin >"$dir/admin.token"
    printf 'Authorization: Bearer %s\n' "$(cat "$dir/admin.token")" >"$dir/admin.header"
  )
}

# _pulsar_secure_curl ARGS...: curl as the super user (the token read from a file, not argv).
_pulsar_secure_curl() { curl -sf -m 10 -H "@$PULSAR_SECURE_DIR/secrets/admin.header" "$@"; }

# _pulsar_secure_ready HTTP_PORT: as _pulsar_ready, as the super user, and the TLS port answers.
_pulsar_secure_ready() {
  local base=http://127.0.0.1:$1/admin/v2
  _pulsar_secure_curl "$base/brokers/health" >/dev/null &&
    _pulsar_secure_curl "$base/namespaces/public" 2>/dev/null | grep -q '"public/default"' &&
    _pulsar_secure_curl --cacert "$PULSAR_SECURE_DIR/tls/ca.pem" \
      "https://127.0.0.1:$PULSAR_SECURE_HTTPS_PORT/admin/v2/brokers/health" >/dev/null
}

# _pulsar_secure_conf: the settings appended to pulsar.sh's standalone.conf.
_pulsar_secure_conf() {
  local tls=$PULSAR_SECURE_DIR/tls secrets=$PULSAR_SECURE_DIR/secrets
  cat <<EOF
brokerServicePortTls=$PULSAR_SECURE_TLS_PORT
webServicePortTls=$PULSAR_SECURE_HTTPS_PORT
tlsCertificateFilePath=$tls/server.pem
tlsKeyFilePath=$tls/server.key
tlsTrustCertsFilePath=$tls/ca.pem
tlsRequireTrustedClientCertOnConnect=false
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken
tokenSecretKey=file://$secrets/token-secret.key
authorizationEnabled=true
superUserRoles=admin
brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
brokerClientAuthenticationParameters=file://$secrets/admin.token
brokerClientTrustCertsFilePath=$tls/ca.pem
EOF
}

# _pulsar_secure_setup: tenant "secure", its namespaces and the roles' permissions (idempotent:
# a tenant or namespace that exists answers 409).
_pulsar_secure_setup() {
  local base=http://127.0.0.1:$PULSAR_SECURE_HTTP_PORT/admin/v2 code ns json=(-H 'Content-Type: application/json')
  code=$(_pulsar_secure_curl -o /dev/null -w '%{http_code}' -X PUT "${json[@]}" \
    -d '{"adminRoles":[],"allowedClusters":["standalone"]}' "$base/tenants/secure" || true)
  [[ $code == 204 || $code == 409 ]] || { echo "pulsar-secure: create tenant secure: HTTP $code" >&2; return 1; }
  for ns in granted refused; do
    code=$(_pulsar_secure_curl -o /dev/null -w '%{http_code}' -X PUT "$base/namespaces/secure/$ns" || true)
    [[ $code == 204 || $code == 409 ]] || { echo "pulsar-secure: create namespace secure/$ns: HTTP $code" >&2; return 1; }
  done
  _pulsar_secure_curl -X POST "${json[@]}" -d '["produce"]' "$base/namespaces/secure/granted/permissions/relay" &&
    _pulsar_secure_curl -X POST "${json[@]}" -d '["consume"]' "$base/namespaces/secure/granted/permissions/consumer" &&
    _pulsar_secure_curl -X POST "${json[@]}" -d '["consume"]' "$base/namespaces/secure/refused/permissions/consumer" ||
    { echo "pulsar-secure: grant the roles' permissions failed" >&2; return 1; }
}

# _pulsar_secure_locked CMD...: run CMD for the secure instance under its lock.
_pulsar_secure_locked() {
  mkdir -p "$PULSAR_SECURE_DIR" "$SERVICES_LOG_DIR"
  chmod 700 "$PULSAR_SECURE_DIR"
  exec 9>"$PULSAR_SECURE_DIR/start.lock"
  flock 9
  local rc=0
  "$@" || rc=$?
  flock -u 9
  return $rc
}

_pulsar_secure_start() {
  make_test_certs "$PULSAR_SECURE_DIR/tls" pulsar-secure
  _pulsar_secure_secrets
  PULSAR_DIR=$PULSAR_SECURE_DIR PULSAR_LOG=$SERVICES_LOG_DIR/pulsar-secure.log PULSAR_NAME=pulsar-secure \
    PULSAR_READY=_pulsar_secure_ready PULSAR_EXTRA_CONF=$(_pulsar_secure_conf) \
    PULSAR_PORT=$PULSAR_SECURE_PORT PULSAR_HTTP_PORT=$PULSAR_SECURE_HTTP_PORT \
    PULSAR_BOOKIE_PORT=$PULSAR_SECURE_BOOKIE_PORT start_pulsar 9>&- >/dev/null || return 1
  _pulsar_secure_setup || return 1
  echo "pulsar-secure: pulsar+ssl://127.0.0.1:$PULSAR_SECURE_TLS_PORT (https://127.0.0.1:$PULSAR_SECURE_HTTPS_PORT)"
}

# start_pulsar_secure: start the secure broker unless it runs, and make sure its tenant,
# namespaces and permissions exist.
start_pulsar_secure() { _pulsar_secure_locked _pulsar_secure_start; }

stop_pulsar_secure() { _pulsar_secure_locked stop_pidfile "$PULSAR_SECURE_DIR/pulsar.pid"; }

# restart_pulsar_secure: stop the secure broker and start it again (same key, data, certificates).
# Both under one lock, so two restarts asked for at once are two restarts, one after the other.
restart_pulsar_secure() { _pulsar_secure_locked _pulsar_secure_restart; }

_pulsar_secure_restart() { stop_pidfile "$PULSAR_SECURE_DIR/pulsar.pid" && _pulsar_secure_start; }

# print_pulsar_secure_env: the secure broker's addresses and file paths (not the tokens).
print_pulsar_secure_env() {
  cat <<EOF
export OUTBOXKIT_TEST_PULSAR_SECURE_URL='pulsar+ssl://127.0.0.1:$PULSAR_SECURE_TLS_PORT'
export OUTBOXKIT_TEST_PULSAR_SECURE_HTTPS='https://127.0.0.1:$PULSAR_SECURE_HTTPS_PORT'
export OUTBOXKIT_TEST_PULSAR_SECURE_CA_FILE='$PULSAR_SECURE_DIR/tls/ca.pem'
export OUTBOXKIT_TEST_PULSAR_SECURE_UNTRUSTED_CA_FILE='$PULSAR_SECURE_DIR/tls/untrusted-ca.pem'
export OUTBOXKIT_TEST_PULSAR_SECURE_SECRET_KEY_FILE='$PULSAR_SECURE_DIR/secrets/token-secret.key'
EOF
}
