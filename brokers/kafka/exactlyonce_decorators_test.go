package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outboxkit/outboxkit/brokers/cloudevents"
	"github.com/outboxkit/outboxkit/forwarder"
)

// TestExactlyOnceWithTracingAndCloudEvents: exactly-once delivery through the decorators a user
// adds, on the real Kafka. Tracing gives each event one producer span inside the Kafka
// transaction (ended without error once it committed) and sends its context with the record;
// CloudEvents adds its attributes to every record; a read_committed consumer still sees every
// event once, in key order. Both decorators keep the publisher's transactions (before, the
// forwarder refused the TracerProvider and failed on the CloudEvents wrapper's type).
func TestExactlyOnceWithTracingAndCloudEvents(t *testing.T) {
	h := newEOHarness(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h.tracer = tp
	keys := eoKeys(10)
	h.write(keys, 0, 5)
	r := h.startRelay("eo-decorated", func(p *Publisher) forwarder.TransactionalPublisher {
		ce, err := cloudevents.NewPublisher(p, cloudevents.Config{Source: "urn:outboxkit:test"})
		if err != nil {
			t.Fatal(err)
		}
		tx, ok := ce.(forwarder.TransactionalPublisher)
		if !ok {
			t.Fatalf("the CloudEvents publisher around a Kafka publisher (%T) has no transactions", ce)
		}
		return tx
	})
	h.waitDrained(2 * time.Minute)
	r.stop()
	if c := r.counter("outboxkit_forwarder_transactions_committed_total"); c == 0 {
		t.Fatal("no transaction committed: the decorated publisher did not run exactly-once delivery")
	}

	got := h.readAll(h.topic, true, len(keys)*5, 60*time.Second)
	checkExactlyOnce(t, got, keys, 5)
	for _, c := range got {
		if c.headers[cloudevents.AttrSpecVersion] != cloudevents.SpecVersion || c.headers[cloudevents.AttrID] != c.id {
			t.Fatalf("record %s lacks its CloudEvents attributes: %v", c.id, c.headers)
		}
		if !strings.HasPrefix(c.headers["traceparent"], "00-") {
			t.Fatalf("record %s carries no trace context: %v", c.id, c.headers)
		}
	}
	sent := 0
	for _, s := range exp.GetSpans() {
		if s.Name != "send "+h.topic {
			continue
		}
		sent++
		if s.Status.Code == codes.Error {
			t.Errorf("span of a committed event ended with an error: %s", s.Status.Description)
		}
	}
	if sent != len(keys)*5 {
		t.Errorf("%d producer spans for %d events sent in committed transactions, want one each", sent, len(keys)*5)
	}
}
