package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// `outboxkit relay` with broker: pulsar and max_attempts: 3 (no classifier chosen by the CLI:
// the publisher's own decides): an event over Pulsar's 5 MiB limit ends dead within the budget,
// and the other keys keep flowing; the later event of its key stays parked behind it, and an
// operator sees it in `dead-letters list`.
func TestRelayPulsarDeadLettersOversizedEvent(t *testing.T) {
	t.Parallel()
	relayDeadLettersOversizedEvent(t, oversizedCase{
		name:       "ppoison",
		broker:     fmt.Sprintf("broker: pulsar\npulsar:\n  url: %s\n", testsupport.PulsarURL(t)),
		payload:    6 << 20,
		maxAttempt: 3,
	})
}

// `outboxkit relay` with broker: nats (the NATS of scripts/services.sh) and max_attempts: 3 (no
// classifier chosen by the CLI: brokers/nats' own decides): an event over the server's 1 MiB
// max_payload is a permanent error, dead at its first attempt, while the other keys flow; the
// later event of its key stays parked behind it, and an operator sees it in `dead-letters list`.
func TestRelayNATSDeadLettersOversizedEvent(t *testing.T) {
	t.Parallel()
	relayDeadLettersOversizedEvent(t, oversizedCase{
		name:       "npoison",
		broker:     fmt.Sprintf("broker: nats\nnats:\n  urls: [%s]\n  partitions: 4\n", testsupport.NATSURL(t)),
		payload:    1100 << 10,
		maxAttempt: 1, // a permanent error: dead at its first attempt
	})
}

// oversizedCase is one broker's run of relayDeadLettersOversizedEvent.
type oversizedCase struct {
	name       string // of the table and topic
	broker     string // the configuration's broker part
	payload    int    // the oversized event's payload, over the broker's limit
	maxAttempt int    // the most attempts the event may take (the relay's max_attempts is 3)
	// deadLetterTopic is the relay's forwarder.dead_letter_topic; empty: <topic>.dead.
	deadLetterTopic string
}

// relayDeadLettersOversizedEvent runs the relay with max_attempts 3 on 20 events of 5 keys, one
// event over the broker's limit and a later event of its key: the oversized event must end dead
// within c.maxAttempt attempts, the other keys flow, the later event stays parked, and
// `dead-letters list` shows the dead one.
func relayDeadLettersOversizedEvent(t *testing.T, c oversizedCase) {
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_" + c.name)
	topic := testsupport.UniqueName("cli." + c.name)
	dropTables(t, db, table)
	dlq := c.deadLetterTopic
	if dlq == "" {
		dlq = topic + ".dead"
	}
	cfg := strings.Replace(pgConfig(testsupport.PostgresDSN(t), table, c.broker), "forwarder:\n",
		"forwarder:\n  max_attempts: 3\n  max_interval: 500ms\n  dead_letter_topic: "+dlq+"\n", 1)
	dir := writeConfig(t, cfg)
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	big, later := writeOversizedAmongOthers(t, db, table, topic, c.payload)

	p := startRelay(t, dir)
	p.waitLog(t, "forwarder started")
	// The budget: three attempts with backoffs of at most 500 ms, plus the dead letter; the
	// 2 minutes only bound a hang.
	deadline := time.Now().Add(2 * time.Minute)
	var dead, left, attempts int
	for time.Now().Before(deadline) {
		dead = count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 2 AND event_id = $1", big.ID)
		left = count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE aggregate_id <> 'order-big'")
		if dead == 1 && left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var lastError string
	if err := db.QueryRow("SELECT attempts, COALESCE(last_error, '') FROM "+table+" WHERE event_id = $1", big.ID).Scan(&attempts, &lastError); err != nil {
		t.Fatal(err)
	}
	if dead != 1 || left != 0 {
		t.Fatalf("after 2 minutes: oversized event dead=%d (attempts %d, last error %q), %d other rows left, want it dead and none of the other keys left",
			dead, attempts, lastError, left)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 0 AND event_id = $1", later.ID); n != 1 {
		t.Errorf("the later event of the dead key is not parked (pending rows with its id: %d)", n)
	}
	if attempts < 1 || attempts > c.maxAttempt {
		t.Errorf("the oversized event took %d attempts, want 1 to %d", attempts, c.maxAttempt)
	}
	res := cli(t, dir, "dead-letters", "list")
	if line := grepLines(res.stdout, big.ID.String()); res.code != 0 || !strings.Contains(line, topic) {
		t.Errorf("dead-letters list does not show the oversized event: %s", res)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("relay exited with %d, want 0", code)
	}
}

// writeOversizedAmongOthers commits, in one transaction, an event of payload bytes (random, so
// that compression cannot shrink it) for key order-big, 20 small events of 5 other keys, and a
// later small event of order-big; it returns the oversized and the later event.
func writeOversizedAmongOthers(t *testing.T, db *sql.DB, table, topic string, payload int) (big, later outbox.Event) {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table, MaxPayloadBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	big = outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: topic, AggregateType: "order", AggregateID: "order-big",
		EventType: "OrderPlaced", Payload: make([]byte, payload)}
	_, _ = rand.Read(big.Payload)
	events := []outbox.Event{big}
	for i := range 20 {
		events = append(events, outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: topic, AggregateType: "order",
			AggregateID: fmt.Sprintf("order-%d", i%5), EventType: "OrderPlaced", Payload: []byte(`{}`)})
	}
	later = outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: topic, AggregateType: "order", AggregateID: "order-big",
		EventType: "OrderPlaced", Payload: []byte(`{}`)}
	events = append(events, later)
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTx(context.Background(), tx, events...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return big, later
}
