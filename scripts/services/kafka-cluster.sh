# shellcheck shell=bash
# A three-node Apache Kafka 4 cluster (KRaft, every node a combined broker+controller), shaped like
# a production cluster: default.replication.factor=3, min.insync.replicas=2, the transaction state
# log and the consumer offsets replicated 3 times (transaction log min ISR 2). The same Kafka jars
# as the other brokers, with Kafka's tools (scripts/services/kafka-secure/pom.xml: TopicCommand
# tells when a restarted node has caught up). Not started by `up`: tests and benchmarks that
# need a replicated cluster start it (and stop it, since three JVMs cost the 2-core machine).
# Sourced by scripts/services.sh; defines start_kafka_cluster, stop_kafka_cluster,
# kill_kafka_cluster_broker, start_kafka_cluster_broker, restart_kafka_cluster_broker and
# print_kafka_cluster_env.
#
# Ports (loopback): node N (1..3) listens for clients on KAFKA_CLUSTER_PORT+N-1 (19192, 19193,
# 19194) and for the controllers on KAFKA_CLUSTER_CONTROLLER_PORT+N-1 (19292, 19293, 19294).
# State: KAFKA_CLUSTER_DIR (default $SERVICES_STATE_DIR/kafka-cluster), one directory per node
# (nN/server.properties, nN/data, nN/kafka.pid), logs in $SERVICES_LOG_DIR/kafka-cluster-N.log.
#
# start-kafka-cluster starts the nodes that are not running; when none is, it starts from empty
# data (a test cluster holds nothing worth keeping). kill-kafka-cluster-broker N SIGKILLs node N
# (its data stays, as after a crash); start-kafka-cluster-broker N starts it again on that data,
# and waits until it has caught up (every partition fully replicated again), so that the next
# node killed cannot take the last in-sync replica with it. Operations are serialized by a lock.

_kafka_cluster_pom="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-secure/pom.xml"

: "${KAFKA_CLUSTER_PORT:=19192}"
: "${KAFKA_CLUSTER_CONTROLLER_PORT:=19292}"
: "${KAFKA_CLUSTER_DIR:=$SERVICES_STATE_DIR/kafka-cluster}"
: "${KAFKA_CLUSTER_HEAP:=-Xms256m -Xmx384m}"
_kafka_cluster_nodes=(1 2 3)

_kafka_cluster_port() { echo $((KAFKA_CLUSTER_PORT + $1 - 1)); }
_kafka_cluster_controller_port() { echo $((KAFKA_CLUSTER_CONTROLLER_PORT + $1 - 1)); }
_kafka_cluster_log() { echo "$SERVICES_LOG_DIR/kafka-cluster-$1.log"; }
_kafka_cluster_pidfile() { echo "$KAFKA_CLUSTER_DIR/n$1/kafka.pid"; }

_kafka_cluster_node_ready() {
  port_open "$(_kafka_cluster_port "$1")" && grep -q 'Kafka Server started' "$(_kafka_cluster_log "$1")"
}

_kafka_cluster_running() { pidfile_pid "$(_kafka_cluster_pidfile "$1")" >/dev/null; }

# _kafka_cluster_bootstrap: the client addresses of the three nodes, comma-separated.
_kafka_cluster_bootstrap() {
  local n out=()
  for n in "${_kafka_cluster_nodes[@]}"; do out+=("127.0.0.1:$(_kafka_cluster_port "$n")"); done
  (IFS=,; echo "${out[*]}")
}

_kafka_cluster_java() {
  "$JAVA_BIN" -Xmx256m -XX:+UseSerialGC -cp "$(cat "$KAFKA_CLUSTER_DIR/classpath")" \
    -Dlog4j2.configurationFile="$KAFKA_CLUSTER_DIR/log4j2.properties" "$@"
}

# _kafka_cluster_config N: node N's server.properties (and the shared log4j2.properties).
_kafka_cluster_config() {
  local n=$1 dir=$KAFKA_CLUSTER_DIR/n$1 voters=() m
  for m in "${_kafka_cluster_nodes[@]}"; do voters+=("$m@127.0.0.1:$(_kafka_cluster_controller_port "$m")"); done
  mkdir -p "$dir"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$(IFS=,; echo "${voters[*]}")
listeners=PLAINTEXT://127.0.0.1:$(_kafka_cluster_port "$n"),CONTROLLER://127.0.0.1:$(_kafka_cluster_controller_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(_kafka_cluster_port "$n")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=4
default.replication.factor=3
min.insync.replicas=2
auto.create.topics.enable=true
offsets.topic.replication.factor=3
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=12
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
message.max.bytes=1048588
num.network.threads=2
num.io.threads=4
num.replica.fetchers=1
background.threads=4
EOF
  cat >"$KAFKA_CLUSTER_DIR/log4j2.properties" <<'EOF'
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
}

# _kafka_cluster_classpath: resolve the broker's jars (once, or when the pom changed).
_kafka_cluster_classpath() {
  if ! grep -q kafka-tools- "$KAFKA_CLUSTER_DIR/classpath" 2>/dev/null || [ "$KAFKA_CLUSTER_DIR/classpath" -ot "$_kafka_cluster_pom" ]; then
    mvn -q -B -f "$_kafka_cluster_pom" dependency:build-classpath -Dmdep.outputFile="$KAFKA_CLUSTER_DIR/classpath" \
      >"$SERVICES_LOG_DIR/kafka-cluster-maven.log" 2>&1 ||
      fail "kafka-cluster (maven resolution)" "$SERVICES_LOG_DIR/kafka-cluster-maven.log"
  fi
}

# _kafka_cluster_format: empty data for every node, formatted with one new cluster id.
_kafka_cluster_format() {
  local n cluster_id
  cluster_id=$(_kafka_cluster_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  for n in "${_kafka_cluster_nodes[@]}"; do
    rm -rf "$KAFKA_CLUSTER_DIR/n$n/data" "$(_kafka_cluster_pidfile "$n")"
    _kafka_cluster_config "$n"
    _kafka_cluster_java kafka.tools.StorageTool format -t "$cluster_id" \
      -c "$KAFKA_CLUSTER_DIR/n$n/server.properties" >"$(_kafka_cluster_log "$n")" 2>&1 ||
      fail "kafka-cluster node $n (storage format)" "$(_kafka_cluster_log "$n")"
  done
}

# _kafka_cluster_launch N: start node N's JVM on its existing data (no wait).
_kafka_cluster_launch() {
  local n=$1 dir=$KAFKA_CLUSTER_DIR/n$1 logfile; logfile=$(_kafka_cluster_log "$1")
  _kafka_cluster_config "$n"
  : >"$logfile"
  # shellcheck disable=SC2086 # KAFKA_CLUSTER_HEAP holds several JVM flags
  setsid "$JAVA_BIN" $KAFKA_CLUSTER_HEAP -XX:+UseSerialGC -XX:CICompilerCount=2 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KAFKA_CLUSTER_DIR/log4j2.properties" -cp "$(cat "$KAFKA_CLUSTER_DIR/classpath")" \
    kafka.Kafka "$dir/server.properties" </dev/null >>"$logfile" 2>&1 8>&- &
  echo $! >"$(_kafka_cluster_pidfile "$n")"
}

# _kafka_cluster_replicated: true when the cluster answers and lists no under-replicated
# partition.
_kafka_cluster_replicated() {
  local out
  out=$(_kafka_cluster_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$(_kafka_cluster_bootstrap)" \
    --describe --under-replicated-partitions 2>&1) || return 1
  ! grep -q 'Partition:' <<<"$out"
}

_kafka_cluster_lock() {
  mkdir -p "$KAFKA_CLUSTER_DIR"
  exec 8>"$KAFKA_CLUSTER_DIR/lock"
  flock 8
}

_kafka_cluster_unlock() { flock -u 8; }

start_kafka_cluster() {
  _kafka_cluster_lock
  _kafka_cluster_classpath
  local n any=0
  for n in "${_kafka_cluster_nodes[@]}"; do _kafka_cluster_running "$n" && any=1; done
  ((any)) || _kafka_cluster_format
  for n in "${_kafka_cluster_nodes[@]}"; do _kafka_cluster_running "$n" || _kafka_cluster_launch "$n"; done
  for n in "${_kafka_cluster_nodes[@]}"; do
    wait_for "kafka-cluster node $n" "$(_kafka_cluster_log "$n")" _kafka_cluster_node_ready "$n"
  done
  _kafka_cluster_unlock
  echo "kafka-cluster: $(_kafka_cluster_bootstrap)"
}

# stop_kafka_cluster: stop the three nodes together (TERM; KILL after 60 s, by stop_pidfile).
stop_kafka_cluster() {
  _kafka_cluster_lock
  local n pids=()
  for n in "${_kafka_cluster_nodes[@]}"; do
    stop_pidfile "$(_kafka_cluster_pidfile "$n")" &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  _kafka_cluster_unlock
}

_kafka_cluster_node_arg() {
  case "${1:-}" in
  1 | 2 | 3) ;;
  *) echo "kafka-cluster: node ${1:-<none>} is not 1, 2 or 3" >&2 && exit 2 ;;
  esac
}

# kill_kafka_cluster_broker N: SIGKILL node N (a crash: no controlled shutdown, data kept).
kill_kafka_cluster_broker() {
  _kafka_cluster_node_arg "$1"
  _kafka_cluster_lock
  local pidfile pid; pidfile=$(_kafka_cluster_pidfile "$1")
  if pid=$(pidfile_pid "$pidfile"); then
    kill -9 "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  fi
  rm -f "$pidfile"
  _kafka_cluster_unlock
  echo "kafka-cluster: node $1 killed"
}

# start_kafka_cluster_broker N: start node N on its data and wait until every partition is
# fully replicated again.
start_kafka_cluster_broker() {
  _kafka_cluster_node_arg "$1"
  _kafka_cluster_lock
  _kafka_cluster_running "$1" || _kafka_cluster_launch "$1"
  wait_for "kafka-cluster node $1" "$(_kafka_cluster_log "$1")" _kafka_cluster_node_ready "$1"
  wait_for "kafka-cluster node $1 (catching up)" "$(_kafka_cluster_log "$1")" _kafka_cluster_replicated
  _kafka_cluster_unlock
  echo "kafka-cluster: node $1 on 127.0.0.1:$(_kafka_cluster_port "$1")"
}

# restart_kafka_cluster_broker N: stop node N cleanly (controlled shutdown: its leaderships move
# first) and start it again.
restart_kafka_cluster_broker() {
  _kafka_cluster_node_arg "$1"
  _kafka_cluster_lock
  stop_pidfile "$(_kafka_cluster_pidfile "$1")"
  _kafka_cluster_unlock
  start_kafka_cluster_broker "$1"
}

print_kafka_cluster_env() {
  echo "export OUTBOXKIT_TEST_KAFKA_CLUSTER_BROKERS='$(_kafka_cluster_bootstrap)'"
}
