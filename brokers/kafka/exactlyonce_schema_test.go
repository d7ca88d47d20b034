package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestExactlyOnceWithSchemas: exactly-once delivery through brokers/schema's publisher around
// the Kafka publisher, on the real Kafka and the real registry. The schema publisher keeps the
// Kafka publisher's transactions (forwarder.TransactionalPublisher), so the forwarder runs
// exactly-once delivery with it; every event goes encoded in the Confluent wire format (the
// registered schema's id) inside the transactions, and a read_committed consumer decodes each
// event once, in key order. An event that does not fit its schema fails its transaction alone:
// it is dead-lettered at its first attempt (as JSON, with its schema version and field path) in
// the next one, and the others commit.
func TestExactlyOnceWithSchemas(t *testing.T) {
	h := newEOHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client, err := sr.NewClient(sr.URLs(testsupport.SchemaRegistryURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := client.CreateSchema(ctx, schema.Subject(h.topic), sr.Schema{Type: sr.TypeAvro,
		Schema: `{"type":"record","name":"Order","fields":[{"name":"key","type":"string"},{"name":"n","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := schema.NewEncoder(client, schema.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := schema.NewDecoder(client)
	if err != nil {
		t.Fatal(err)
	}
	var header sr.ConfluentHeader
	h.decode = func(value []byte) []byte {
		if id, _, err := header.DecodeID(value); err != nil || id != ss.ID {
			t.Errorf("record value % x is not framed with schema id %d (%v)", value, ss.ID, err)
			return nil
		}
		out, err := dec.Decode(ctx, value)
		if err != nil {
			t.Errorf("decode: %v", err)
		}
		return out
	}
	h.publisherClassifies = true // a mismatch is permanent by the schema publisher's Retriable
	keys := eoKeys(6)
	h.write(keys, 0, 4)
	poison, err := outbox.NewJSONEvent(h.topic, "order", "poison", "OrderChanged", map[string]any{"key": "poison", "n": "four"})
	if err != nil {
		t.Fatal(err)
	}
	poison.ID = uuid.Must(uuid.NewV7())
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.writer.WriteTx(ctx, tx, poison); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := h.startRelay("eo-schema", func(p *Publisher) forwarder.TransactionalPublisher {
		pub, err := schema.NewPublisher(p, enc)
		if err != nil {
			t.Fatal(err)
		}
		tx, ok := pub.(forwarder.TransactionalPublisher)
		if !ok {
			t.Fatalf("the schema publisher around a Kafka publisher (%T) has no transactions", pub)
		}
		return tx
	})
	h.waitDrained(2 * time.Minute)
	r.stop()
	if c := r.counter("outboxkit_forwarder_transactions_committed_total"); c == 0 {
		t.Fatal("no transaction committed: the schema publisher did not run exactly-once delivery")
	}
	checkExactlyOnce(t, h.readAll(h.topic, true, len(keys)*4, 60*time.Second), keys, 4)

	h.decode = nil // the dead letter is the event's JSON as written
	dead := h.readAll(h.topic+"-dlq", true, 1, 60*time.Second)
	if len(dead) != 1 || dead[0].id != poison.ID.String() {
		t.Fatalf("dead letters %+v, want the poison event %s once", dead, poison.ID)
	}
	reason := dead[0].headers[middleware.ReasonForPoisonedKey]
	if !strings.Contains(reason, "version 1 ") || !strings.Contains(reason, "at $.n: want an integer, got a string") {
		t.Fatalf("dead letter reason %q does not name the schema version and the field path", reason)
	}
	if attempts := dead[0].headers["outbox_attempts"]; attempts != "1" {
		t.Fatalf("the poison event was dead-lettered after %s attempts, want 1 (a mismatch is permanent)", attempts)
	}
}
