#!/usr/bin/env bash
# Brings up every real service outboxkit's tests talk to, on loopback ports:
#   PostgreSQL 15 and MariaDB (Debian packages), Apache Kafka 4 in KRaft mode and
#   Apache Pulsar standalone (jars from Maven Central, resolved into Maven's local cache), and a
#   NATS server with JetStream (built with `go build` from the Go module proxy, scripts/services/nats.sh),
#   and RabbitMQ (Debian package, a node of its own, scripts/services/rabbitmq.sh), and Apicurio
#   Registry, the Confluent-compatible schema registry (built from Maven Central jars,
#   scripts/services/apicurio.sh).
# Safe to run again: a service that already answers is left alone.
#
#   scripts/services.sh [up]      install what is missing, start everything, print addresses
#   scripts/services.sh env       print the environment variables the tests read
#   scripts/services.sh down      stop everything this script started
#   scripts/services.sh restart-kafka | restart-pulsar
#   scripts/services.sh restart-nats | start-nats | stop-nats
#   scripts/services.sh restart-rabbitmq | start-rabbitmq | stop-rabbitmq
#   scripts/services.sh start-kafka | stop-kafka | start-pulsar | stop-pulsar
#   scripts/services.sh start-schema-registry | stop-schema-registry | restart-schema-registry
#                                 start or stop that one service only (with other ports and
#                                 SERVICES_STATE_DIR, a dedicated broker, e.g. for fault tests)
#   scripts/services.sh start-kafka-secure | stop-kafka-secure | restart-kafka-secure
#   scripts/services.sh kafka-secure-grant TOPIC [USER]
#                                 the SASL_SSL (SCRAM-SHA-512) broker with ACLs, not started by
#                                 `up` (see scripts/services/kafka-secure.sh)
#   scripts/services.sh start-pulsar-secure | stop-pulsar-secure | restart-pulsar-secure
#                                 the Pulsar standalone with TLS, token authentication and
#                                 authorization, not started by `up` (scripts/services/pulsar-secure.sh)
#   scripts/services.sh start-kafka-cluster | stop-kafka-cluster
#   scripts/services.sh kill-kafka-cluster-broker N | start-kafka-cluster-broker N | restart-kafka-cluster-broker N
#                                 the three-node Kafka cluster (RF 3, min ISR 2) on 19192-19194, not
#                                 started by `up` (scripts/services/kafka-cluster.sh)
#
# Every port and path can be overridden through the variables below.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

: "${SERVICES_STATE_DIR:=/var/tmp/outboxkit-services}"
: "${SERVICES_LOG_DIR:=$SERVICES_STATE_DIR/logs}"
: "${PG_PORT:=15432}"
: "${MARIADB_PORT:=13306}"
: "${KAFKA_PORT:=19092}"
: "${KAFKA_CONTROLLER_PORT:=19093}"
: "${PULSAR_PORT:=6650}"
: "${PULSAR_HTTP_PORT:=8080}"
: "${PULSAR_BOOKIE_PORT:=3181}"
: "${SERVICE_START_TIMEOUT:=240}"
export SERVICES_STATE_DIR SERVICES_LOG_DIR PULSAR_PORT PULSAR_HTTP_PORT PULSAR_BOOKIE_PORT

JAVA_BIN=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}/bin/java
PG_BIN=/usr/lib/postgresql/15/bin

log() { printf '%s services: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# fail NAME LOGFILE: print the tail of a service's log and exit.
fail() {
  log "$1 failed to start; last lines of $2:"
  tail -n 60 "$2" >&2 || true
  exit 1
}

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for NAME LOGFILE CMD...: retry CMD once a second until it succeeds or the timeout passes.
wait_for() {
  local name=$1 logfile=$2; shift 2
  local deadline=$((SECONDS + SERVICE_START_TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      fail "$name (not ready after ${SERVICE_START_TIMEOUT}s)" "$logfile"
    fi
    sleep 1
  done
}

# timed NAME CMD...: run CMD and report how long it took.
timed() {
  local name=$1 start=$SECONDS; shift
  "$@"
  log "$name ready in $((SECONDS - start))s"
}

install_packages() {
  local missing=()
  [ -x "$PG_BIN/postgres" ] || missing+=(postgresql-15 postgresql-client-15)
  command -v mariadbd >/dev/null 2>&1 || missing+=(mariadb-server mariadb-client)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  # A JDK: Pulsar's main class is compiled at its first start (scripts/services/pulsar.sh).
  [ -x "$JAVA_BIN" ] && [ -x "$(dirname "$(readlink -f "$JAVA_BIN")")/javac" ] || missing+=(openjdk-17-jdk-headless)
  # Headless Chromium for the web console's browser test (cmd/outboxkit.TestConsoleInChromium).
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  ((${#missing[@]} == 0)) && return 0
  log "installing Debian packages: ${missing[*]}"
  # Keep the packages' own init scripts from starting daemons on their default ports.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  apt-get update -qq >"$SERVICES_LOG_DIR/apt.log" 2>&1 || fail apt-get "$SERVICES_LOG_DIR/apt.log"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >>"$SERVICES_LOG_DIR/apt.log" 2>&1 || fail apt-get "$SERVICES_LOG_DIR/apt.log"
  rm -f /usr/sbin/policy-rc.d
}

# --- PostgreSQL -------------------------------------------------------------------------------

pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; }

start_postgres() {
  local dir=$SERVICES_STATE_DIR/postgres logfile=$SERVICES_LOG_DIR/postgres.log
  if ! pg_ready; then
    if [ ! -f "$dir/PG_VERSION" ]; then
      mkdir -p "$dir" && chown postgres:postgres "$dir" && chmod 700 "$dir"
      su postgres -s /bin/sh -c "$PG_BIN/initdb -D '$dir' -U postgres --auth=trust -E UTF8" \
        >"$logfile" 2>&1 || fail postgres "$logfile"
    fi
    touch "$logfile" && chown postgres:postgres "$logfile"
    su postgres -s /bin/sh -c "$PG_BIN/pg_ctl -D '$dir' -l '$logfile' -w -t 60 start -o \
      '-p $PG_PORT -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 \
       -c shared_buffers=256MB -c wal_level=logical -c max_replication_slots=8'" \
      >>"$logfile" 2>&1 || fail postgres "$logfile"
    wait_for postgres "$logfile" pg_ready
  fi
  psql -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 >/dev/null <<'SQL' || fail postgres "$logfile"
SELECT 'CREATE ROLE outboxkit LOGIN SUPERUSER PASSWORD ''outboxkit'''
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'outboxkit') \gexec
SELECT 'CREATE DATABASE outboxkit OWNER outboxkit'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'outboxkit') \gexec
SQL
  echo "postgres: postgres://outboxkit:outboxkit@127.0.0.1:$PG_PORT/outboxkit"
}

# --- MariaDB ----------------------------------------------------------------------------------

mariadb_ready() { mariadb-admin --protocol=socket --socket="$SERVICES_STATE_DIR/mariadb/mysqld.sock" -uroot ping; }

start_mariadb() {
  local dir=$SERVICES_STATE_DIR/mariadb logfile=$SERVICES_LOG_DIR/mariadb.log
  if ! mariadb_ready >/dev/null 2>&1; then
    if [ ! -d "$dir/data/mysql" ]; then
      mkdir -p "$dir/data" && chown -R mysql:mysql "$dir"
      mariadb-install-db --user=mysql --datadir="$dir/data" >"$logfile" 2>&1 || fail mariadb "$logfile"
    fi
    chown mysql:mysql "$dir"
    setsid mariadbd --no-defaults --user=mysql --datadir="$dir/data" --port="$MARIADB_PORT" \
      --bind-address=127.0.0.1 --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
      --log-error="$logfile" --innodb-buffer-pool-size=256M --max-connections=400 \
      --innodb-flush-log-at-trx-commit=1 </dev/null >>"$logfile" 2>&1 &
    wait_for mariadb "$logfile" mariadb_ready
  fi
  mariadb --socket="$dir/mysqld.sock" -uroot <<'SQL' || fail mariadb "$logfile"
CREATE DATABASE IF NOT EXISTS outboxkit;
CREATE USER IF NOT EXISTS 'outboxkit'@'%' IDENTIFIED BY 'outboxkit';
CREATE USER IF NOT EXISTS 'outboxkit'@'localhost' IDENTIFIED BY 'outboxkit';
GRANT ALL PRIVILEGES ON *.* TO 'outboxkit'@'%' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'outboxkit'@'localhost' WITH GRANT OPTION;
SQL
  echo "mariadb: outboxkit:outboxkit@tcp(127.0.0.1:$MARIADB_PORT)/outboxkit"
}

# --- Kafka (KRaft, one combined broker+controller) ---------------------------------------------

kafka_ready() { port_open "$KAFKA_PORT" && grep -q 'Kafka Server started' "$SERVICES_LOG_DIR/kafka.log"; }

start_kafka() {
  local dir=$SERVICES_STATE_DIR/kafka logfile=$SERVICES_LOG_DIR/kafka.log
  if port_open "$KAFKA_PORT"; then
    echo "kafka: 127.0.0.1:$KAFKA_PORT (already running)"
    return 0
  fi
  mkdir -p "$dir"
  if killed_uncleanly "$dir/kafka.pid"; then
    echo "kafka: the last broker was killed without shutting down; starting from empty data" >&2
    rm -rf "$dir/data" "$dir/kafka.pid"
  fi
  mvn -q -B -f "$here/services/kafka/pom.xml" dependency:build-classpath \
    -Dmdep.outputFile="$dir/classpath" >"$SERVICES_LOG_DIR/kafka-maven.log" 2>&1 ||
    fail "kafka (maven resolution)" "$SERVICES_LOG_DIR/kafka-maven.log"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=4
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
message.max.bytes=1048588
EOF
  cat >"$dir/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = info
logger.apache.name = org.apache.kafka
logger.apache.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
EOF
  local cp; cp=$(cat "$dir/classpath")
  if [ ! -f "$dir/data/meta.properties" ]; then
    local cluster_id; cluster_id=$("$JAVA_BIN" -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    "$JAVA_BIN" -cp "$cp" -Dlog4j2.configurationFile="$dir/log4j2.properties" kafka.tools.StorageTool format \
      -t "$cluster_id" -c "$dir/server.properties" >"$logfile" 2>&1 || fail "kafka (storage format)" "$logfile"
  fi
  : >"$logfile"
  setsid "$JAVA_BIN" -Xms256m -Xmx768m -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$cp" \
    kafka.Kafka "$dir/server.properties" </dev/null >>"$logfile" 2>&1 &
  echo $! >"$dir/kafka.pid"
  wait_for kafka "$logfile" kafka_ready
  echo "kafka: 127.0.0.1:$KAFKA_PORT"
}

# --- Pid files of the services started here ----------------------------------------------------
# shellcheck source=services/pidfile.sh
source "$here/services/pidfile.sh"

# --- Prometheus tools (promtool, prometheus) for internal/monitoring's tests --------------------
# shellcheck source=services/monitoring.sh
source "$here/services/monitoring.sh"

# --- Pulsar -----------------------------------------------------------------------------------
# shellcheck source=services/pulsar.sh
source "$here/services/pulsar.sh"
# shellcheck source=services/nats.sh
source "$here/services/nats.sh"
# shellcheck source=services/rabbitmq.sh
source "$here/services/rabbitmq.sh"
# shellcheck source=services/apicurio.sh
source "$here/services/apicurio.sh"
# shellcheck source=services/tls.sh
source "$here/services/tls.sh"
# shellcheck source=services/kafka-secure.sh
source "$here/services/kafka-secure.sh"
# shellcheck source=services/pulsar-secure.sh
source "$here/services/pulsar-secure.sh"
# shellcheck source=services/kafka-cluster.sh
source "$here/services/kafka-cluster.sh"

print_env() {
  cat <<EOF
export OUTBOXKIT_TEST_PG_DSN='postgres://outboxkit:outboxkit@127.0.0.1:$PG_PORT/outboxkit?sslmode=disable'
export OUTBOXKIT_TEST_MYSQL_DSN='outboxkit:outboxkit@tcp(127.0.0.1:$MARIADB_PORT)/outboxkit?parseTime=true&multiStatements=true'
export OUTBOXKIT_KAFKA_BROKERS='127.0.0.1:$KAFKA_PORT'
export OUTBOXKIT_PULSAR_URL='pulsar://127.0.0.1:$PULSAR_PORT'
export OUTBOXKIT_TEST_PULSAR_HTTP='http://127.0.0.1:$PULSAR_HTTP_PORT'
EOF
  print_nats_env
  print_rabbitmq_env
  print_apicurio_env
  print_kafka_secure_env
  print_pulsar_secure_env
  print_kafka_cluster_env
}

main() {
  mkdir -p "$SERVICES_STATE_DIR" "$SERVICES_LOG_DIR"
  chmod 755 "$SERVICES_STATE_DIR" "$SERVICES_LOG_DIR"
  case "${1:-up}" in
  up)
    timed packages install_packages
    timed monitoring install_monitoring
    timed postgres start_postgres
    timed mariadb start_mariadb
    timed kafka start_kafka
    timed pulsar start_pulsar
    timed nats start_nats
    timed rabbitmq start_rabbitmq
    timed "schema registry" start_apicurio
    log "logs in $SERVICES_LOG_DIR"
    ;;
  env) print_env ;;
  down)
    stop_pidfile "$SERVICES_STATE_DIR/kafka/kafka.pid"
    stop_pidfile "$SERVICES_STATE_DIR/pulsar/pulsar.pid"
    stop_nats
    stop_rabbitmq
    stop_apicurio
    stop_pidfile "$KAFKA_SECURE_DIR/kafka.pid"
    stop_pidfile "$PULSAR_SECURE_DIR/pulsar.pid"
    stop_kafka_cluster
    [ -f "$SERVICES_STATE_DIR/mariadb/mysqld.pid" ] && stop_pidfile "$SERVICES_STATE_DIR/mariadb/mysqld.pid"
    [ -f "$SERVICES_STATE_DIR/postgres/postmaster.pid" ] &&
      su postgres -s /bin/sh -c "$PG_BIN/pg_ctl -D '$SERVICES_STATE_DIR/postgres' -m fast stop" >/dev/null
    log "stopped"
    ;;
  restart-kafka) stop_pidfile "$SERVICES_STATE_DIR/kafka/kafka.pid" && start_kafka ;;
  restart-pulsar) stop_pidfile "$SERVICES_STATE_DIR/pulsar/pulsar.pid" && start_pulsar ;;
  restart-nats) stop_nats && start_nats ;;
  start-nats) start_nats ;;
  stop-nats) stop_nats ;;
  restart-rabbitmq) stop_rabbitmq && start_rabbitmq ;;
  start-rabbitmq) start_rabbitmq ;;
  stop-rabbitmq) stop_rabbitmq ;;
  start-schema-registry) start_apicurio ;;
  stop-schema-registry) stop_apicurio ;;
  restart-schema-registry) stop_apicurio && start_apicurio ;;
  start-kafka) start_kafka ;;
  stop-kafka) stop_pidfile "$SERVICES_STATE_DIR/kafka/kafka.pid" ;;
  start-pulsar) start_pulsar ;;
  stop-pulsar) stop_pidfile "$SERVICES_STATE_DIR/pulsar/pulsar.pid" ;;
  start-kafka-secure) start_kafka_secure ;;
  stop-kafka-secure) stop_kafka_secure ;;
  restart-kafka-secure) restart_kafka_secure ;;
  kafka-secure-grant) kafka_secure_grant "${@:2}" ;;
  start-pulsar-secure) start_pulsar_secure ;;
  stop-pulsar-secure) stop_pulsar_secure ;;
  restart-pulsar-secure) restart_pulsar_secure ;;
  start-kafka-cluster) start_kafka_cluster ;;
  stop-kafka-cluster) stop_kafka_cluster ;;
  kill-kafka-cluster-broker) kill_kafka_cluster_broker "${2:-}" ;;
  start-kafka-cluster-broker) start_kafka_cluster_broker "${2:-}" ;;
  restart-kafka-cluster-broker) restart_kafka_cluster_broker "${2:-}" ;;
  *)
    echo "usage: $0 [up|env|down|restart-kafka|restart-pulsar|restart-nats|start-nats|stop-nats|restart-rabbitmq|start-rabbitmq|stop-rabbitmq|start-schema-registry|stop-schema-registry|restart-schema-registry|start-kafka|stop-kafka|start-pulsar|stop-pulsar|start-kafka-secure|stop-kafka-secure|restart-kafka-secure|kafka-secure-grant TOPIC [USER]|start-pulsar-secure|stop-pulsar-secure|restart-pulsar-secure|start-kafka-cluster|stop-kafka-cluster|kill-kafka-cluster-broker N|start-kafka-cluster-broker N|restart-kafka-cluster-broker N]" >&2
    exit 2
    ;;
  esac
}

main "$@"
