# shellcheck shell=bash
# Test certificates made with openssl at start time (never committed), shared by the secure
# brokers (kafka-secure.sh, pulsar-secure.sh). Sourced by scripts/services.sh; defines
# make_test_certs.

# make_test_certs DIR NAME: in DIR, a CA (ca.pem), a server certificate for 127.0.0.1 and
# localhost signed by it (server.pem, its unencrypted PKCS#8 key server.key) and an unrelated CA
# (untrusted-ca.pem) that signed nothing the server presents, for negative tests. Made again (all
# of them) when one is missing or the server certificate expires within a day; NAME names the
# service in errors. openssl's output goes to $SERVICES_LOG_DIR/NAME-openssl.log.
make_test_certs() {
  local tls=$1 name=$2 logfile=$SERVICES_LOG_DIR/$2-openssl.log
  if [ -f "$tls/server.key" ] && [ -f "$tls/untrusted-ca.pem" ] &&
    openssl x509 -checkend 86400 -noout -in "$tls/server.pem" >/dev/null 2>&1; then
    return 0
  fi
  rm -rf "$tls" && mkdir -p "$tls" && chmod 700 "$tls"
  local ext="$tls/server.ext"
  printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=digitalSignature,keyEncipherment' \
    'extendedKeyUsage=serverAuth,clientAuth' 'subjectAltName=IP:127.0.0.1,DNS:localhost' >"$ext"
  {
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=outboxkit test CA" \
      -keyout "$tls/ca.key" -out "$tls/ca.pem" &&
      openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$tls/server.key" -out "$tls/server.csr" &&
      openssl x509 -req -days 30 -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
        -CAcreateserial -extfile "$ext" -out "$tls/server.pem" &&
      openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=outboxkit untrusted CA" \
        -keyout "$tls/untrusted-ca.key" -out "$tls/untrusted-ca.pem"
  } >"$logfile" 2>&1 || fail "$name (openssl)" "$logfile"
  chmod 600 "$tls"/*.key
  chmod 644 "$tls/ca.pem" "$tls/untrusted-ca.pem" "$tls/server.pem"
}
