package pythonorders_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// scheduleResult is what `service.py schedule` prints.
type scheduleResult struct {
	Scheduled []struct {
		EventID   string `json:"event_id"`
		OrderID   string `json:"order_id"`
		DeliverAt string `json:"deliver_at"`
	} `json:"scheduled"`
	Cancelled []string `json:"cancelled"`
}

// TestPythonOrdersScheduled: the Python service writes scheduled events by plain SQL (the
// deliver_at column, two seconds after the database's now(), docs/writers.md) in the orders'
// transactions, and cancels the first with the documented DELETE ... WHERE status = 4 in the
// payment's transaction; `outboxkit relay` publishes the others to Kafka not before their
// deliver_at (the Kafka record's timestamp, taken when the relay produces it, against the
// deliver_at the database stored), and the cancelled one never (the topic, read to its end once
// the relay emptied the outbox).
func TestPythonOrdersScheduled(t *testing.T) {
	python := pythonEnv(t)
	dsn := testsupport.PostgresDSN(t)
	brokers := testsupport.KafkaBrokers(t)
	db := testsupport.OpenPostgres(t)
	prefix := testsupport.UniqueName("pysched") + "_"
	dropPrefixed(t, db, prefix)
	bin := buildCLI(t)
	shape := outboxkitShape{table: prefix + "outbox", topicName: strings.TrimSuffix(prefix, "_") + ".events"}
	dir := writeRelayConfig(t, dsn, shape.relayTable(), brokers)
	runPython(t, python, nil, append([]string{"service.py", "schema", "--dsn", dsn, "--prefix", prefix}, shape.serviceArgs()...)...)
	shape.prepare(t, bin, dir)
	testsupport.CreateKafkaTopic(t, brokers, shape.topic())
	r := startRelay(t, bin, dir)

	var res scheduleResult
	runPython(t, python, &res, append([]string{"service.py", "schedule", "--dsn", dsn, "--prefix", prefix,
		"--orders", "3", "--delay", "2"}, shape.serviceArgs()...)...)
	if len(res.Scheduled) != 3 || !slices.Equal(res.Cancelled, []string{res.Scheduled[0].EventID}) {
		t.Fatalf("service scheduled %d events and cancelled %v; want 3, the first cancelled", len(res.Scheduled), res.Cancelled)
	}
	cancelled := res.Cancelled[0]
	due := map[string]time.Time{}
	for _, s := range res.Scheduled[1:] {
		at, err := time.Parse(time.RFC3339Nano, s.DeliverAt)
		if err != nil {
			t.Fatalf("deliver_at %q of %s: %v", s.DeliverAt, s.EventID, err)
		}
		due[s.EventID] = at
	}

	// Once the relay emptied the outbox, everything it published is in the topic.
	waitEmpty(t, db, shape.table)
	records := testsupport.ReadKafkaTopic(t, brokers, shape.topic())
	seen := map[string]bool{}
	for _, rec := range records {
		var id string
		for _, h := range rec.Headers {
			if h.Key == outbox.MetadataEventID {
				id = string(h.Value)
			}
		}
		if id == cancelled {
			t.Errorf("the cancelled event %s was published", cancelled)
			continue
		}
		at, ok := due[id]
		if !ok {
			t.Errorf("record of event %q, which the service did not schedule", id)
			continue
		}
		// Kafka timestamps are whole milliseconds.
		if rec.Timestamp.Before(at.Truncate(time.Millisecond)) {
			t.Errorf("event %s was produced at %s, before its deliver_at %s", id, rec.Timestamp.UTC(), at)
		}
		seen[id] = true
		t.Logf("event %s produced %s after its deliver_at", id, rec.Timestamp.Sub(at).Round(time.Millisecond))
	}
	if len(seen) != len(due) {
		t.Errorf("%d of the %d scheduled events that were not cancelled were published", len(seen), len(due))
	}
	r.stop(t)
}
