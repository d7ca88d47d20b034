# shellcheck shell=bash
# Prometheus' tools for internal/monitoring's tests: promtool (`check rules`, `test rules` on
# deploy/prometheus/) and the prometheus server binary, from Debian's prometheus package.
# Sourced by scripts/services.sh; defines install_monitoring, which `up` runs.
#
# Only the binaries are used: the tests run their own Prometheus on a temporary configuration,
# port and storage directory, so the package's own service is kept from starting.

install_monitoring() {
  if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    return 0
  fi
  local logfile=$SERVICES_LOG_DIR/apt-monitoring.log
  log "installing Debian package: prometheus"
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  apt-get update -qq >"$logfile" 2>&1 || fail apt-get "$logfile"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
    >>"$logfile" 2>&1 || fail apt-get "$logfile"
  rm -f /usr/sbin/policy-rc.d
}
