# shellcheck shell=bash
# NATS server with JetStream for the tests, the CLI and the fault run: the nats-server binary is
# built with `go build` from the Go module cache (filled from the Go module proxy) at the version
# go.mod pins (github.com/nats-io/nats-server/v2, which internal/testsupport/natsserver also runs
# in-process), so no download other than Go modules is needed.
# Sourced by scripts/services.sh; defines start_nats, stop_nats and print_nats_env.
#
# Listens on 127.0.0.1: NATS_PORT (14222, clients) and NATS_MONITOR_PORT (18222, /healthz).
# State (binary, store, pid file) goes to $SERVICES_STATE_DIR/nats, the log to
# $SERVICES_LOG_DIR/nats.log. The JetStream store survives a stop: restart-nats is a broker
# restart with its streams kept, as the fault run needs.

: "${NATS_PORT:=14222}"
: "${NATS_MONITOR_PORT:=18222}"
_nats_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

_nats_dir() { echo "$SERVICES_STATE_DIR/nats"; }

# _nats_ready: the server answers its health check with JetStream up.
_nats_ready() { curl -sf -m 5 "http://127.0.0.1:$NATS_MONITOR_PORT/healthz?js-enabled-only=true" >/dev/null; }

# _nats_build: build bin/nats-server at go.mod's version unless it is there already.
_nats_build() {
  local dir version bin
  dir=$(_nats_dir)
  bin=$dir/bin/nats-server
  version=$(cd "$_nats_repo" && go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2) || return 1
  if [ -x "$bin" ] && [ "$(cat "$dir/bin/version" 2>/dev/null)" = "$version" ]; then
    return 0
  fi
  mkdir -p "$dir/bin"
  (cd "$_nats_repo" && GOFLAGS=-mod=mod go build -o "$bin.tmp" github.com/nats-io/nats-server/v2) \
    >"$SERVICES_LOG_DIR/nats-build.log" 2>&1 || return 1
  mv "$bin.tmp" "$bin"
  echo "$version" >"$dir/bin/version"
}

start_nats() {
  local dir logfile=$SERVICES_LOG_DIR/nats.log
  dir=$(_nats_dir)
  if port_open "$NATS_PORT"; then
    echo "nats: nats://127.0.0.1:$NATS_PORT (already running)"
    return 0
  fi
  mkdir -p "$dir/data"
  _nats_build || fail "nats (go build of nats-server)" "$SERVICES_LOG_DIR/nats-build.log"
  : >"$logfile"
  setsid "$dir/bin/nats-server" -a 127.0.0.1 -p "$NATS_PORT" -m "$NATS_MONITOR_PORT" \
    -js -sd "$dir/data" -n outboxkit-test </dev/null >>"$logfile" 2>&1 &
  echo $! >"$dir/nats.pid"
  wait_for nats "$logfile" _nats_ready
  echo "nats: nats://127.0.0.1:$NATS_PORT"
}

stop_nats() { stop_pidfile "$(_nats_dir)/nats.pid"; }

print_nats_env() {
  echo "export OUTBOXKIT_TEST_NATS_URL='nats://127.0.0.1:$NATS_PORT'"
}
