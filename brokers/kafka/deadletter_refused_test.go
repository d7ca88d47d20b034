package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// An event whose headers alone exceed the broker's limit, written by another writer (plain SQL:
// outbox.Writer bounds the headers now): neither the event nor its full dead letter can be
// published. It ends dead in the table within the budget, its dead letter reduced to the ids and
// the reason, and the other keys flow (the later events of its key stay parked behind it, as
// behind any dead event, until an operator replays or discards it). On both delivery modes.
func TestOversizedHeadersEndDead(t *testing.T) {
	for _, delivery := range []forwarder.Delivery{forwarder.AtLeastOnce, forwarder.ExactlyOnce} {
		t.Run(string(delivery), func(t *testing.T) { oversizedHeadersEndDead(t, delivery) })
	}
}

func oversizedHeadersEndDead(t *testing.T, delivery forwarder.Delivery) {
	h := newEOHarness(t)
	h.maxBytes = 64 << 10
	keys := eoKeys(5)
	h.startEither(delivery, "hdr")
	h.write(keys, 0, 3)
	id := h.insertSQL(keys[0], map[string]string{"big": strings.Repeat("h", 100<<10)})
	h.write(keys, 3, 2)

	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	var status, attempts int
	var lastError string
	for {
		if err := h.db.QueryRow("SELECT status, attempts, COALESCE(last_error, '') FROM "+h.writer.Table().Events()+
			" WHERE event_id = $1", id).Scan(&status, &attempts, &lastError); err != nil {
			t.Fatal(err)
		}
		if status == 2 && h.pendingRows() == 2 { // the key's 2 later events
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes the event with oversized headers has status %d, %d attempts, last error %q; %d rows pending, want 2",
				status, attempts, lastError, h.pendingRows())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var others int
	if err := h.db.QueryRow("SELECT count(*) FROM "+h.writer.Table().Events()+" WHERE aggregate_id <> $1", keys[0]).Scan(&others); err != nil {
		t.Fatal(err)
	}
	if others != 0 {
		t.Errorf("%d rows of the other keys left, want none", others)
	}
	if !strings.Contains(lastError, "MESSAGE_TOO_LARGE") {
		t.Errorf("last_error %q does not say why", lastError)
	}
	headers := h.deadLetterHeaders(delivery == forwarder.ExactlyOnce, id)
	if headers == nil {
		t.Fatalf("no dead letter of %s in %s", id, h.topic+"-dlq")
	}
	if _, ok := headers["big"]; ok || headers[forwarder.MetadataHeadersDropped] == "" ||
		headers[outbox.MetadataAggregateID] != keys[0] || headers["reason_poisoned"] == "" {
		t.Errorf("dead letter headers %v: want the ids, the reason and the headers-dropped marker, not the user headers", headers)
	}
}

// startEither runs a relay of the delivery mode with the harness's settings and returns its
// metrics.
func (h *eoHarness) startEither(delivery forwarder.Delivery, id string) *prometheus.Registry {
	h.t.Helper()
	if delivery == forwarder.ExactlyOnce {
		return h.startRelay(id+"-eo", nil).metrics
	}
	return h.startDirect(id+"-alo", delivery, false)
}

// startDirect runs a relay of the delivery mode on the harness's database pool, with
// MaxAttempts 3 and UnlimitedRetries as given, and returns its metrics.
func (h *eoHarness) startDirect(id string, delivery forwarder.Delivery, unlimited bool) *prometheus.Registry {
	h.t.Helper()
	reg := prometheus.NewRegistry()
	pub, err := NewPublisher(Config{Brokers: h.brokers, MessageMaxBytes: h.maxBytes}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	f, err := forwarder.New(forwarder.Config{
		DB: h.db, Dialect: outbox.Postgres, Table: h.writer.Table().Events(), Publisher: pub, RelayID: id,
		DeadLetterTopic: h.topic + "-dlq", IsRetriable: Retriable, MaxAttempts: 3, Metrics: reg, UnlimitedRetries: unlimited,
		Delivery: delivery, CheckpointTopic: h.checkpoint, TransactionalIDPrefix: h.prefix,
		LeaseTTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		InitialInterval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("relay", id),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("relay %s: %v", id, err)
		}
		_ = pub.Close()
	})
	return reg
}

// insertSQL commits one event of key with the given headers by plain SQL, as a writer in
// another language would, and returns its id.
func (h *eoHarness) insertSQL(key string, headers map[string]string) uuid.UUID {
	h.t.Helper()
	id := uuid.Must(uuid.NewV7())
	hdr, err := json.Marshal(headers)
	if err != nil {
		h.t.Fatal(err)
	}
	hash := outbox.KeyHash("", "order", key)
	if _, err := h.db.Exec(fmt.Sprintf("INSERT INTO %s (event_id, topic, aggregate_type, aggregate_id, event_type, payload, headers, key_hash, partition_no) "+
		"VALUES ($1, $2, 'order', $3, 'OrderChanged', $4, $5, $6, $7)", h.writer.Table().Events()),
		id, h.topic, key, []byte(`{}`), string(hdr), hash, outbox.PartitionOf(hash)); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// deadLetterHeaders returns the headers of the dead letter of event id, or nil if none arrived
// within 2 minutes (a bound against a hang: it returns as soon as the dead letter is read).
func (h *eoHarness) deadLetterHeaders(committed bool, id uuid.UUID) map[string]string {
	h.t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(h.brokers...), kgo.ConsumeTopics(h.topic + "-dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		var found map[string]string
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			headers := map[string]string{}
			for _, hd := range r.Headers {
				headers[hd.Key] = string(hd.Value)
			}
			if headers[outbox.MetadataEventID] == id.String() {
				found = headers
			}
		})
		if found != nil {
			return found
		}
	}
	return nil
}

// An event the broker refuses, whose dead letter the broker refuses too, even reduced to the
// ids and the reason (here the dead-letter topic's max.message.bytes is below any dead letter):
// the row ends dead in the table with a reason saying the dead letter could not be published,
// counted (dead_letter_refused_total) and listed among the dead letters, instead of being
// retried forever; the other keys flow. On both delivery modes, also with UnlimitedRetries
// (which retries retriable errors without end, not refusals).
func TestRefusedDeadLetterEndsDeadInTable(t *testing.T) {
	for _, delivery := range []forwarder.Delivery{forwarder.AtLeastOnce, forwarder.ExactlyOnce} {
		t.Run(string(delivery), func(t *testing.T) { refusedDeadLetterEndsDeadInTable(t, delivery, false) })
		t.Run(string(delivery)+"/unlimited_retries", func(t *testing.T) { refusedDeadLetterEndsDeadInTable(t, delivery, true) })
	}
}

func refusedDeadLetterEndsDeadInTable(t *testing.T, delivery forwarder.Delivery, unlimited bool) {
	h := newEOHarness(t)
	h.maxBytes = 64 << 10
	h.createTinyTopic(h.topic+"-dlq", 300)
	keys := eoKeys(5)
	var metrics *prometheus.Registry
	if unlimited {
		metrics = h.startDirect("refused-unlimited", delivery, true)
	} else {
		metrics = h.startEither(delivery, "refused")
	}
	h.write(keys, 0, 3)
	big := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: h.topic, AggregateType: "order", AggregateID: keys[0],
		EventType: "OrderChanged", Payload: []byte(strings.Repeat("p", 100<<10))}
	tx, err := h.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.writer.WriteTx(context.Background(), tx, big); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	h.write(keys, 3, 2)

	adm, err := admin.New(h.db, outbox.Postgres, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	var dead []admin.DeadLetter
	for {
		if dead, err = adm.DeadLetters(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		if len(dead) == 1 && h.pendingRows() == 2 {
			break
		}
		if time.Now().After(deadline) {
			var status, attempts int
			var lastError string
			_ = h.db.QueryRow("SELECT status, attempts, COALESCE(last_error, '') FROM "+h.writer.Table().Events()+
				" WHERE event_id = $1", big.ID).Scan(&status, &attempts, &lastError)
			t.Fatalf("after 2 minutes: %d dead letters listed, %d rows pending (want 1 and 2); the event has status %d, %d attempts, last error %q",
				len(dead), h.pendingRows(), status, attempts, lastError)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if dead[0].EventID != big.ID || !strings.Contains(dead[0].LastError, "the dead letter could not be published to "+h.topic+"-dlq") {
		t.Errorf("dead letter %+v: want the event, with a reason saying its dead letter could not be published", dead[0])
	}
	if n := testsupport.CounterSum(t, metrics, "outboxkit_forwarder_dead_letter_refused_total"); n != 1 {
		t.Errorf("dead_letter_refused_total = %v, want 1", n)
	}
}

// createTinyTopic creates topic with max.message.bytes set to maxBytes.
func (h *eoHarness) createTinyTopic(topic string, maxBytes int) {
	h.t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	if err != nil {
		h.t.Fatal(err)
	}
	defer client.Close()
	size := fmt.Sprint(maxBytes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(client).CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": &size}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		h.t.Fatalf("create topic %s: %v", topic, err)
	}
}
