// Package pythonorders_test runs the python-orders example (service.py, consumer.py) against the
// real PostgreSQL and Kafka with `outboxkit relay` between them.
package pythonorders_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

type written struct {
	EventID string `json:"event_id"`
	OrderID string `json:"order_id"`
	Version int    `json:"version"`
}

type writeResult struct {
	Committed  []written `json:"committed"`
	RolledBack []written `json:"rolled_back"`
	Errors     []string  `json:"errors"`
}

type consumeResult struct {
	Applied    int      `json:"applied"`
	Duplicates int      `json:"duplicates"`
	Violations []string `json:"violations"`
}

const (
	orders  = 12  // the ordering keys
	changes = 240 // transactions, over 4 Python threads
)

// TestPythonOrders: the Python service writes orders and their events by plain INSERT into
// outboxkit's table, concurrently on few orders, rolling back about 10 % of its transactions;
// `outboxkit relay` forwards them to Kafka; the Python consumer applies each event once. Every
// committed event is applied exactly once and in its order's version order, none of the
// rolled-back ones appears, a second consumer group re-reading the topic applies nothing, the
// relay empties the outbox.
func TestPythonOrders(t *testing.T) {
	prefix := testsupport.UniqueName("pyorders") + "_"
	runScenario(t, prefix, outboxkitShape{table: prefix + "outbox", topicName: strings.TrimSuffix(prefix, "_") + ".events"})
}

// TestPythonOrdersSeed004 is the same with seed 004's own outbox_events table, written exactly
// as the seed's service does (id, aggregate_id, aggregate_type, event_type, JSONB payload and
// headers, status PENDING by default), adopted with `outboxkit adopt`: the relay forwards its
// rows to <prefix>.order.events (the seed's {aggregate_type|lower}.events) and every committed
// row ends PUBLISHED with published_at set.
func TestPythonOrdersSeed004(t *testing.T) {
	prefix := testsupport.UniqueName("pyseed") + "_"
	runScenario(t, prefix, seed004Shape{table: prefix + "outbox_events", relay: prefix + "relay",
		topicPrefix: strings.TrimSuffix(prefix, "_")})
}

// runScenario migrates or adopts (shape), starts the relay, runs the service and the consumer
// twice (a second group re-reads everything), and checks the outcome.
func runScenario(t *testing.T, prefix string, shape outboxShape) {
	python := pythonEnv(t)
	dsn := testsupport.PostgresDSN(t)
	brokers := testsupport.KafkaBrokers(t)
	db := testsupport.OpenPostgres(t)
	dropPrefixed(t, db, prefix)
	bin := buildCLI(t)

	dir := writeRelayConfig(t, dsn, shape.relayTable(), brokers)
	runPython(t, python, nil, append([]string{"service.py", "schema", "--dsn", dsn, "--prefix", prefix}, shape.serviceArgs()...)...)
	shape.prepare(t, bin, dir)
	testsupport.CreateKafkaTopic(t, brokers, shape.topic())
	r := startRelay(t, bin, dir)

	var w writeResult
	runPython(t, python, &w, append([]string{"service.py", "write", "--dsn", dsn, "--prefix", prefix,
		"--orders", strconv.Itoa(orders), "--changes", strconv.Itoa(changes), "--threads", "4", "--rollback", "0.1"},
		shape.serviceArgs()...)...)
	if len(w.Errors) > 0 || len(w.Committed)+len(w.RolledBack) != changes || len(w.RolledBack) == 0 {
		t.Fatalf("service wrote %d committed and %d rolled-back changes, errors %v; want %d in all, some rolled back",
			len(w.Committed), len(w.RolledBack), w.Errors, changes)
	}
	t.Logf("service: %d committed, %d rolled back over %d orders", len(w.Committed), len(w.RolledBack), orders)

	consumerArgs := []string{"consumer.py", "--dsn", dsn, "--prefix", prefix, "--brokers", strings.Join(brokers, ","),
		"--topic", shape.topic(), "--expect", strconv.Itoa(len(w.Committed)), "--timeout", "180"}
	var first, replay consumeResult
	runPython(t, python, &first, append(consumerArgs, "--group", prefix+"views")...)
	if first.Applied != len(w.Committed) || len(first.Violations) > 0 {
		t.Errorf("consumer applied %d events (want %d), order violations %v", first.Applied, len(w.Committed), first.Violations)
	}
	// A second group reads the topic from the start: every event is a duplicate for the inbox.
	runPython(t, python, &replay, append(consumerArgs, "--group", prefix+"replay")...)
	if replay.Applied != 0 || replay.Duplicates < len(w.Committed) {
		t.Errorf("replay applied %d events and ignored %d duplicates, want 0 and at least %d", replay.Applied, replay.Duplicates, len(w.Committed))
	}
	t.Logf("consumer: %d applied, %d duplicates; replay: %d applied, %d duplicates", first.Applied, first.Duplicates, replay.Applied, replay.Duplicates)

	checkProcessed(t, db, prefix, w)
	shape.check(t, db, w)
	r.stop(t)
}

// writeRelayConfig writes the relay's outboxkit.yaml for table into a new directory and returns it.
func writeRelayConfig(t *testing.T, dsn, table string, brokers []string) string {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`database:
  dialect: postgres
  dsn: %s
  table: %s
forwarder:
  initial_interval: 50ms
  max_poll_interval: 200ms
http:
  listen: 127.0.0.1:0
broker: kafka
kafka:
  brokers: [%s]
`, dsn, table, strings.Join(brokers, ", "))
	if err := os.WriteFile(filepath.Join(dir, "outboxkit.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
