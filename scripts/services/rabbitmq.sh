# shellcheck shell=bash
# RabbitMQ from Debian's rabbitmq-server package (installed by install_rabbitmq when missing),
# run as a node of its own, not as the package's system service: its own node name, loopback
# ports, Erlang port mapper port, cookie, configuration, data and logs, all under
# $SERVICES_STATE_DIR/rabbitmq, so that several instances (the shared one, and the fault run's
# own with other ports and another SERVICES_STATE_DIR) run side by side.
# Sourced by scripts/services.sh; defines install_rabbitmq, start_rabbitmq, stop_rabbitmq and
# print_rabbitmq_env.
#
# AMQP over TLS on RABBITMQ_TLS_PORT (15674) with a certificate of a private CA made at start
# (make_test_certs, scripts/services/tls.sh) under $SERVICES_STATE_DIR/rabbitmq/tls; clients are
# not asked for a certificate.
#
# Listens on 127.0.0.1: RABBITMQ_PORT (15673, AMQP 0-9-1), RABBITMQ_TLS_PORT (15674, AMQPS),
# RABBITMQ_DIST_PORT (25673, Erlang distribution, for rabbitmqctl) and RABBITMQ_EPMD_PORT (14369,
# the Erlang port mapper this node registers with). No plugin is enabled (no management UI). User
# outboxkit/outboxkit, vhost "/". max_message_size is 16 MiB. `-outboxkit_state DIR/` on the
# node's command line (ignored by Erlang) lets the pid file check (scripts/services/pidfile.sh)
# recognise the node. The data survives a stop: restart-rabbitmq is a broker restart with its
# durable queues and persistent messages kept, as the fault run needs.

: "${RABBITMQ_PORT:=15673}"
: "${RABBITMQ_TLS_PORT:=15674}"
: "${RABBITMQ_DIST_PORT:=25673}"
: "${RABBITMQ_EPMD_PORT:=14369}"
: "${RABBITMQ_NODE_NAME:=outboxkit-$RABBITMQ_PORT@localhost}"
: "${RABBITMQ_MAX_MESSAGE_SIZE:=16777216}"

_rabbitmq_dir() { echo "$SERVICES_STATE_DIR/rabbitmq"; }

# _rabbitmq_env CMD...: run CMD with the environment of this instance.
_rabbitmq_env() {
  local dir
  dir=$(_rabbitmq_dir)
  env HOME="$dir" \
    ERL_EPMD_PORT="$RABBITMQ_EPMD_PORT" \
    ERL_EPMD_ADDRESS=127.0.0.1 \
    RABBITMQ_NODENAME="$RABBITMQ_NODE_NAME" \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$RABBITMQ_PORT" \
    RABBITMQ_DIST_PORT="$RABBITMQ_DIST_PORT" \
    RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
    RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
    RABBITMQ_MNESIA_BASE="$dir/mnesia" \
    RABBITMQ_LOG_BASE="$dir/log" \
    RABBITMQ_PID_FILE="$dir/rabbitmq.pid" \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -outboxkit_state $dir/" \
    "$@"
}

# _rabbitmq_ctl ARGS...: rabbitmqctl against this instance.
_rabbitmq_ctl() { _rabbitmq_env /usr/lib/rabbitmq/bin/rabbitmqctl -q -n "$RABBITMQ_NODE_NAME" "$@"; }

_rabbitmq_ready() { port_open "$RABBITMQ_PORT" && port_open "$RABBITMQ_TLS_PORT" && _rabbitmq_ctl await_startup --timeout 5; }

install_rabbitmq() {
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] && return 0
  log "installing Debian package rabbitmq-server"
  # Keep the package's init script from starting the system node on the default ports.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server; } \
    >"$SERVICES_LOG_DIR/rabbitmq-apt.log" 2>&1 || { rm -f /usr/sbin/policy-rc.d; fail apt-get "$SERVICES_LOG_DIR/rabbitmq-apt.log"; }
  rm -f /usr/sbin/policy-rc.d
}

start_rabbitmq() {
  local dir logfile=$SERVICES_LOG_DIR/rabbitmq.log
  dir=$(_rabbitmq_dir)
  if port_open "$RABBITMQ_PORT"; then
    if port_open "$RABBITMQ_TLS_PORT"; then
      echo "rabbitmq: amqp://127.0.0.1:$RABBITMQ_PORT (already running)"
      return 0
    fi
    echo "rabbitmq: running without its TLS listener (started by an older script); restarting" >&2
    stop_rabbitmq
  fi
  install_rabbitmq
  mkdir -p "$dir/mnesia" "$dir/log"
  if killed_uncleanly "$dir/rabbitmq.pid"; then
    echo "rabbitmq: the last node was killed without shutting down; starting from empty data" >&2
    rm -rf "$dir/mnesia" "$dir/rabbitmq.pid" && mkdir -p "$dir/mnesia"
  fi
  [ -s "$dir/.erlang.cookie" ] || { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/.erlang.cookie"; }
  chmod 400 "$dir/.erlang.cookie"
  make_test_certs "$dir/tls" rabbitmq
  : >"$dir/rabbitmq-env.conf"
  echo '[].' >"$dir/enabled_plugins"
  echo '[].' >"$dir/advanced.config"
  cat >"$dir/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$RABBITMQ_PORT
listeners.ssl.1 = 127.0.0.1:$RABBITMQ_TLS_PORT
ssl_options.cacertfile = $dir/tls/ca.pem
ssl_options.certfile = $dir/tls/server.pem
ssl_options.keyfile = $dir/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
default_user = outboxkit
default_pass = outboxkit
default_vhost = /
loopback_users = none
max_message_size = $RABBITMQ_MAX_MESSAGE_SIZE
log.file = false
log.console = true
log.console.level = info
disk_free_limit.absolute = 50MB
EOF
  : >"$logfile"
  _rabbitmq_env setsid /usr/lib/rabbitmq/bin/rabbitmq-server </dev/null >>"$logfile" 2>&1 &
  wait_for rabbitmq "$logfile" _rabbitmq_ready
  # The tests leave queues behind (Watermill's suite makes a topic per case): a queue unused for
  # an hour (no consumer, not declared again) is deleted, so a test node does not grow run by run.
  _rabbitmq_ctl set_policy outboxkit-test-expiry '.*' '{"expires":3600000}' --apply-to queues >/dev/null ||
    fail "rabbitmq (set_policy)" "$logfile"
  echo "rabbitmq: amqp://127.0.0.1:$RABBITMQ_PORT"
}

# stop_rabbitmq: a clean shutdown (the node's queues and persistent messages are kept); a node
# that does not answer is stopped through its pid file.
stop_rabbitmq() {
  local dir
  dir=$(_rabbitmq_dir)
  port_open "$RABBITMQ_PORT" || return 0
  _rabbitmq_ctl shutdown >/dev/null 2>&1 || stop_pidfile "$dir/rabbitmq.pid"
  rm -f "$dir/rabbitmq.pid"
  # The node started an Erlang port mapper on its own port; no other node uses that port.
  ERL_EPMD_PORT="$RABBITMQ_EPMD_PORT" epmd -kill >/dev/null 2>&1 || true
}

print_rabbitmq_env() {
  echo "export OUTBOXKIT_TEST_RABBITMQ_URL='amqp://outboxkit:outboxkit@127.0.0.1:$RABBITMQ_PORT/'"
  echo "export OUTBOXKIT_TEST_RABBITMQ_TLS_URL='amqps://outboxkit:outboxkit@127.0.0.1:$RABBITMQ_TLS_PORT/'"
  echo "export OUTBOXKIT_TEST_RABBITMQ_TLS_CA='$(_rabbitmq_dir)/tls'"
}
