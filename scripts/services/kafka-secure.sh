# shellcheck shell=bash
# A second, dedicated Apache Kafka 4 broker (KRaft, one combined broker+controller) whose only
# client listener is SASL_SSL with SCRAM-SHA-512, with ACLs enforced (StandardAuthorizer).
# Sourced by scripts/services.sh; defines start_kafka_secure, stop_kafka_secure,
# restart_kafka_secure, kafka_secure_grant and print_kafka_secure_env.
#
# Everything secret is made here, at start time, under KAFKA_SECURE_DIR (never committed):
#   tls/ca.pem              the CA that signed the broker's certificate (clients trust it)
#   tls/untrusted-ca.pem    a second CA that signed nothing the broker presents (negative tests)
#   tls/server.pem/.key     the broker's certificate for 127.0.0.1 and localhost
#   secrets/<user>.password random passwords (openssl rand) of the SCRAM users, mode 0600
#   admin.properties        Kafka client settings of the super user, for Kafka's own tools
# SCRAM users are created by Kafka's own StorageTool (format --add-scram), ACLs by Kafka's own
# AclCommand (kafka-tools jar). Users and what they may do:
#   admin     super user (setup, inter-broker)
#   relay     WRITE and CREATE on topics prefixed "granted-" (nothing on "refused-" topics)
#   consumer  READ and DESCRIBE on topics prefixed "granted-" and "refused-", READ on groups
#             prefixed "secure-"
# The CONTROLLER listener is PLAINTEXT on loopback and its (ANONYMOUS) principal a super user:
# KRaft cannot authenticate the controller listener with SCRAM. Test use only.
#
# Ports: KAFKA_SECURE_PORT (19094, SASL_SSL), KAFKA_SECURE_CONTROLLER_PORT (19095); with other
# ports, KAFKA_SECURE_DIR and SERVICES_LOG_DIR, another instance (the reconnect tests restart one).
# Starting is idempotent and serialized by a lock file, so concurrent test packages may call it.

_kafka_secure_pom="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-secure/pom.xml"

: "${KAFKA_SECURE_PORT:=19094}"
: "${KAFKA_SECURE_CONTROLLER_PORT:=19095}"
: "${KAFKA_SECURE_DIR:=$SERVICES_STATE_DIR/kafka-secure}"
_kafka_secure_users=(admin relay consumer)

_kafka_secure_log() { echo "$SERVICES_LOG_DIR/kafka-secure.log"; }

_kafka_secure_ready() {
  port_open "$KAFKA_SECURE_PORT" && grep -q 'Kafka Server started' "$(_kafka_secure_log)"
}

# _kafka_secure_java CLASS ARGS...: run one of Kafka's tools on the secure broker's classpath.
_kafka_secure_java() {
  "$JAVA_BIN" -Xmx256m -cp "$(cat "$KAFKA_SECURE_DIR/classpath")" \
    -Dlog4j2.configurationFile="$KAFKA_SECURE_DIR/log4j2.properties" "$@"
}

# _kafka_secure_certs: the test certificates (make_test_certs, scripts/services/tls.sh) and
# Kafka's PEM key store made of them.
_kafka_secure_certs() {
  local tls=$KAFKA_SECURE_DIR/tls
  make_test_certs "$tls" kafka-secure
  if [ ! -f "$tls/server-keystore.pem" ] || [ "$tls/server-keystore.pem" -ot "$tls/server.pem" ]; then
    # Kafka's PEM key store: the (unencrypted PKCS#8) key, then the certificate chain.
    (umask 077 && cat "$tls/server.key" "$tls/server.pem" >"$tls/server-keystore.pem")
  fi
}

# _kafka_secure_secrets: a random password per user, made only together with a fresh format.
_kafka_secure_secrets() {
  local dir=$KAFKA_SECURE_DIR/secrets user
  rm -rf "$dir" && mkdir -p "$dir" && chmod 700 "$dir"
  for user in "${_kafka_secure_users[@]}"; do
    (umask 077 && openssl rand -hex 18 >"$dir/$user.password")
  done
}

_kafka_secure_password() { cat "$KAFKA_SECURE_DIR/secrets/$1.password"; }

# _kafka_secure_config: server.properties, log4j2.properties and admin.properties.
_kafka_secure_config() {
  local dir=$KAFKA_SECURE_DIR tls=$KAFKA_SECURE_DIR/tls admin
  admin=$(_kafka_secure_password admin)
  (
    umask 077
    cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_SECURE_CONTROLLER_PORT
listeners=SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT,CONTROLLER://127.0.0.1:$KAFKA_SECURE_CONTROLLER_PORT
advertised.listeners=SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin";
ssl.keystore.type=PEM
ssl.keystore.location=$tls/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.pem
ssl.client.auth=none
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin;User:ANONYMOUS
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
EOF
    cat >"$dir/admin.properties" <<EOF
bootstrap.servers=127.0.0.1:$KAFKA_SECURE_PORT
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin";
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.pem
EOF
  )
  cat >"$dir/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = info
logger.apache.name = org.apache.kafka
logger.apache.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
EOF
}

# _kafka_secure_acls: the ACLs of the relay and consumer users (once, after a fresh format;
# KRaft keeps them in its metadata log).
_kafka_secure_acls() {
  local dir=$KAFKA_SECURE_DIR
  [ -f "$dir/data/acls.done" ] && return 0
  local acl=(org.apache.kafka.tools.AclCommand --bootstrap-server "127.0.0.1:$KAFKA_SECURE_PORT"
    --command-config "$dir/admin.properties" --add --resource-pattern-type prefixed)
  {
    _kafka_secure_java "${acl[@]}" --allow-principal User:relay \
      --operation Write --operation Create --operation Describe --topic granted- &&
      _kafka_secure_java "${acl[@]}" --allow-principal User:consumer \
        --operation Read --operation Describe --topic granted- --topic refused- --group secure-
  } >>"$SERVICES_LOG_DIR/kafka-secure-acls.log" 2>&1 ||
    fail "kafka-secure (ACLs)" "$SERVICES_LOG_DIR/kafka-secure-acls.log"
  touch "$dir/data/acls.done"
}

# _kafka_secure_start: the body of start_kafka_secure, run under the lock.
_kafka_secure_start() {
  local dir=$KAFKA_SECURE_DIR logfile; logfile=$(_kafka_secure_log)
  if _kafka_secure_ready; then
    _kafka_secure_acls
    echo "kafka-secure: SASL_SSL 127.0.0.1:$KAFKA_SECURE_PORT (already running)"
    return 0
  fi
  if port_open "$KAFKA_SECURE_PORT"; then
    # Something listens but has not logged its start: a broker still starting whose starter
    # died (a live starter would hold the lock). Wait for it.
    wait_for kafka-secure "$logfile" _kafka_secure_ready
    _kafka_secure_acls
    echo "kafka-secure: SASL_SSL 127.0.0.1:$KAFKA_SECURE_PORT"
    return 0
  fi
  if [ ! -s "$dir/classpath" ] || [ "$dir/classpath" -ot "$_kafka_secure_pom" ]; then
    mvn -q -B -f "$_kafka_secure_pom" dependency:build-classpath -Dmdep.outputFile="$dir/classpath" \
      >"$SERVICES_LOG_DIR/kafka-secure-maven.log" 2>&1 ||
      fail "kafka-secure (maven resolution)" "$SERVICES_LOG_DIR/kafka-secure-maven.log"
  fi
  _kafka_secure_certs
  if killed_uncleanly "$dir/kafka.pid"; then
    echo "kafka-secure: the last broker was killed without shutting down; starting from empty data" >&2
    rm -rf "$dir/data" "$dir/kafka.pid"
  fi
  if [ ! -f "$dir/data/meta.properties" ] || [ ! -f "$dir/secrets/admin.password" ]; then
    rm -rf "$dir/data"
    _kafka_secure_secrets
    _kafka_secure_config
    local cluster_id scram=() user
    cluster_id=$(_kafka_secure_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    for user in "${_kafka_secure_users[@]}"; do
      scram+=(--add-scram "SCRAM-SHA-512=[name=$user,password=$(_kafka_secure_password "$user")]")
    done
    _kafka_secure_java kafka.tools.StorageTool format -t "$cluster_id" \
      -c "$dir/server.properties" "${scram[@]}" >"$logfile" 2>&1 || fail "kafka-secure (storage format)" "$logfile"
  else
    _kafka_secure_config
  fi
  : >"$logfile"
  setsid "$JAVA_BIN" -Xms128m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$(cat "$dir/classpath")" \
    kafka.Kafka "$dir/server.properties" </dev/null >>"$logfile" 2>&1 8>&- &
  echo $! >"$dir/kafka.pid"
  wait_for kafka-secure "$logfile" _kafka_secure_ready
  _kafka_secure_acls
  echo "kafka-secure: SASL_SSL 127.0.0.1:$KAFKA_SECURE_PORT"
}

# start_kafka_secure: start the secure broker unless it runs, and make sure its ACLs exist.
start_kafka_secure() {
  mkdir -p "$KAFKA_SECURE_DIR"
  chmod 700 "$KAFKA_SECURE_DIR"
  exec 8>"$KAFKA_SECURE_DIR/start.lock"
  flock 8
  _kafka_secure_start
  flock -u 8
}

stop_kafka_secure() {
  mkdir -p "$KAFKA_SECURE_DIR"
  exec 8>"$KAFKA_SECURE_DIR/start.lock"
  flock 8
  stop_pidfile "$KAFKA_SECURE_DIR/kafka.pid"
  flock -u 8
}

# restart_kafka_secure: stop the secure broker and start it again (same users, ACLs, certificates).
restart_kafka_secure() {
  mkdir -p "$KAFKA_SECURE_DIR"
  exec 8>"$KAFKA_SECURE_DIR/start.lock"
  flock 8
  stop_pidfile "$KAFKA_SECURE_DIR/kafka.pid"
  _kafka_secure_start
  flock -u 8
}

# kafka_secure_grant TOPIC [USER]: let USER (default relay) write to (and create) the literal
# topic TOPIC, with Kafka's AclCommand as the super user.
kafka_secure_grant() {
  local topic=${1:?usage: kafka-secure-grant TOPIC [USER]} user=${2:-relay}
  _kafka_secure_java org.apache.kafka.tools.AclCommand --bootstrap-server "127.0.0.1:$KAFKA_SECURE_PORT" \
    --command-config "$KAFKA_SECURE_DIR/admin.properties" --add --allow-principal "User:$user" \
    --operation Write --operation Create --operation Describe --topic "$topic" 2>&1 | grep -v '^\s*$' >&2 ||
    true
  # AclCommand exits 0 on failures to reach the broker too: check the ACL is there.
  _kafka_secure_java org.apache.kafka.tools.AclCommand --bootstrap-server "127.0.0.1:$KAFKA_SECURE_PORT" \
    --command-config "$KAFKA_SECURE_DIR/admin.properties" --list --topic "$topic" 2>/dev/null |
    grep -q "User:$user.*WRITE" || {
    echo "kafka-secure-grant: the WRITE ACL for User:$user on topic $topic is not listed" >&2
    return 1
  }
}

# print_kafka_secure_env: the secure broker's address and file paths (not the passwords).
print_kafka_secure_env() {
  cat <<EOF
export OUTBOXKIT_TEST_KAFKA_SECURE_BROKERS='127.0.0.1:$KAFKA_SECURE_PORT'
export OUTBOXKIT_TEST_KAFKA_SECURE_CA_FILE='$KAFKA_SECURE_DIR/tls/ca.pem'
export OUTBOXKIT_TEST_KAFKA_SECURE_UNTRUSTED_CA_FILE='$KAFKA_SECURE_DIR/tls/untrusted-ca.pem'
export OUTBOXKIT_TEST_KAFKA_SECURE_SECRETS_DIR='$KAFKA_SECURE_DIR/secrets'
EOF
}
