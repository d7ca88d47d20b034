# shellcheck shell=bash
# Apicurio Registry, the test schema registry: a real registry speaking the Confluent Schema
# Registry API (under /apis/ccompat/v7), with in-memory storage (H2), built from Maven Central jars
# (no Docker, no tarball; see apicurio/pom.xml for the version and why).
# Sourced by scripts/services.sh; defines start_apicurio, stop_apicurio and print_apicurio_env.
#
# Listens on 127.0.0.1:APICURIO_PORT (18081). The first start builds the Quarkus application
# (quarkus-maven-plugin, a few minutes while Maven fills its cache) into
# $SERVICES_STATE_DIR/apicurio/build; later starts reuse it while it is newer than the pom. The
# log goes to $SERVICES_LOG_DIR/apicurio.log (the build's to apicurio-build.log). Storage is in
# memory: a restart forgets every schema, as a test registry should.

: "${APICURIO_PORT:=18081}"
_apicurio_src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/apicurio"

_apicurio_dir() { echo "$SERVICES_STATE_DIR/apicurio"; }
_apicurio_runner() { echo "$(_apicurio_dir)/build/target/apicurio-runtime-1-runner.jar"; }

# _apicurio_ready: the Confluent-compatible API answers.
_apicurio_ready() { curl -sf -m 5 "http://127.0.0.1:$APICURIO_PORT/apis/ccompat/v7/subjects" >/dev/null; }

# _apicurio_build: build the runner jar unless one newer than the pom is there. The application's
# own application.properties (in the app jar) is copied in, with the app jar added to Quarkus's
# index (it ships no Jandex index, so its beans and REST resources would not be found).
_apicurio_build() {
  local dir build runner log=$SERVICES_LOG_DIR/apicurio-build.log version
  dir=$(_apicurio_dir)
  build=$dir/build
  runner=$(_apicurio_runner)
  if [ -f "$runner" ] && [ "$runner" -nt "$_apicurio_src/pom.xml" ] && [ -d "$build/target/lib" ]; then
    return 0
  fi
  rm -rf "$build" && mkdir -p "$build/src/main/resources"
  cp "$_apicurio_src/pom.xml" "$build/pom.xml"
  local mvn=(mvn -B -Dstyle.color=never -s "$_apicurio_src/settings.xml" -f "$build/pom.xml")
  version=$(sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' "$build/pom.xml")
  "${mvn[@]}" -q dependency:copy -Dartifact="io.apicurio:apicurio-registry-app:$version" \
    -DoutputDirectory="$build/app" >"$log" 2>&1 || return 1
  { unzip -p "$build/app/apicurio-registry-app-$version.jar" application.properties &&
    printf '\nquarkus.index-dependency.apicurio-app.group-id=io.apicurio\n' &&
    printf 'quarkus.index-dependency.apicurio-app.artifact-id=apicurio-registry-app\n'; } \
    >"$build/src/main/resources/application.properties" 2>>"$log" || return 1
  "${mvn[@]}" package -DskipTests >>"$log" 2>&1 || return 1
  [ -f "$runner" ]
}

start_apicurio() {
  local dir logfile=$SERVICES_LOG_DIR/apicurio.log
  dir=$(_apicurio_dir)
  if port_open "$APICURIO_PORT"; then
    echo "schema registry: http://127.0.0.1:$APICURIO_PORT/apis/ccompat/v7 (already running)"
    return 0
  fi
  mkdir -p "$dir"
  _apicurio_build || fail "schema registry (maven build of Apicurio Registry)" "$SERVICES_LOG_DIR/apicurio-build.log"
  : >"$logfile"
  # A small heap, the serial collector and C1 only: the registry holds a few test schemas and
  # shares two cores with the brokers. One worker thread: with several, concurrent
  # registrations race in Apicurio 2.4's SQL storage on H2 (the shared sequences row: lock
  # timeouts answered with 500, a new subject refused as "already exists", a duplicate content
  # id), which parallel test packages hit; one worker serialises the requests. (One storage
  # connection instead would block: a request takes a second connection while holding one.)
  setsid "$JAVA_BIN" -Xms32m -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -XX:MaxMetaspaceSize=192m -Djava.awt.headless=true \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$APICURIO_PORT" \
    -Dquarkus.datasource.jdbc.min-size=1 -Dquarkus.datasource.jdbc.initial-size=1 \
    -Dquarkus.datasource.jdbc.max-size=8 \
    -Dquarkus.thread-pool.core-threads=1 -Dquarkus.thread-pool.max-threads=1 \
    -jar "$(_apicurio_runner)" </dev/null >>"$logfile" 2>&1 &
  echo $! >"$dir/apicurio.pid"
  wait_for "schema registry" "$logfile" _apicurio_ready
  echo "schema registry: http://127.0.0.1:$APICURIO_PORT/apis/ccompat/v7"
}

stop_apicurio() { stop_pidfile "$(_apicurio_dir)/apicurio.pid"; }

print_apicurio_env() {
  echo "export OUTBOXKIT_TEST_SCHEMA_REGISTRY_URL='http://127.0.0.1:$APICURIO_PORT/apis/ccompat/v7'"
}
