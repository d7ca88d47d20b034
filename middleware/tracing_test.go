package middleware_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/middleware"
)

// spanAttrs returns a span's attributes by key.
func spanAttrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// spanEvents returns the names of a span's events with their attributes.
func spanEvents(s tracetest.SpanStub) map[string]map[attribute.Key]attribute.Value {
	m := map[string]map[attribute.Key]attribute.Value{}
	for _, e := range s.Events {
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range e.Attributes {
			a[kv.Key] = kv.Value
		}
		m[e.Name] = a
	}
	return m
}

// newTestTracer returns an SDK provider that exports every span synchronously to memory.
func newTestTracer(t testing.TB) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// tracedMsg is eventMsg carrying the W3C trace context of a fresh producer span, returned ended.
func tracedMsg(tp trace.TracerProvider, eventID, payload string) (*message.Message, trace.SpanContext) {
	ctx, producer := tp.Tracer("test").Start(context.Background(), "send orders", trace.WithSpanKind(trace.SpanKindProducer))
	producer.End()
	msg := eventMsg(eventID, payload)
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(msg.Metadata))
	return msg, producer.SpanContext()
}

// TestTracingRecordsInboxAndRetryOutcomes runs Tracing(RetryThenPoison(Inbox)) on deliveries that
// succeed after a retry, are duplicates, and are poisoned, and checks each consumer span: its
// parent is the producer span of the message's traceparent, it carries the event id, and the
// inbox and retry middleware recorded their outcome on it.
func TestTracingRecordsInboxAndRetryOutcomes(t *testing.T) {
	f := newFixture(t, databases()[2]) // SQLite: the outcome recording does not depend on the database
	tp, exp := newTestTracer(t)
	poison := newRecordingPublisher(newGoChannel(t))
	rtp, err := middleware.RetryThenPoison(fastRetry(poison, "orders_poison", 2))
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	h := middleware.Tracing(middleware.TracingConfig{TracerProvider: tp, MessagingSystem: "kafka", ConsumerGroup: "billing"})(
		rtp(f.inbox.Handler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error) {
			id := msg.Metadata.Get("event_id")
			calls[id]++
			if !trace.SpanFromContext(ctx).IsRecording() {
				return nil, errors.New("the handler's context has no recording span")
			}
			switch {
			case id == "bad":
				return nil, errors.New("price service unavailable")
			case id == "flaky" && calls[id] == 1:
				return nil, errors.New("first attempt fails")
			}
			return nil, f.addEffect(ctx, tx, msg)
		})))

	deliver := func(msg *message.Message) tracetest.SpanStub {
		t.Helper()
		exp.Reset()
		if _, err := h(msg); err != nil {
			t.Fatalf("delivery of %s: %v", msg.Metadata.Get("event_id"), err)
		}
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("%d spans for one delivery, want 1", len(spans))
		}
		return spans[0]
	}
	checkSpan := func(s tracetest.SpanStub, producer trace.SpanContext, eventID string) {
		t.Helper()
		if s.SpanKind != trace.SpanKindConsumer || s.Parent.SpanID() != producer.SpanID() ||
			s.SpanContext.TraceID() != producer.TraceID() || !s.Parent.IsRemote() {
			t.Fatalf("span %q kind %v parent %v: want a consumer span, child of the remote producer span %v",
				s.Name, s.SpanKind, s.Parent, producer)
		}
		a := spanAttrs(s)
		for k, want := range map[attribute.Key]string{
			"messaging.message.id": eventID, "messaging.system": "kafka", "messaging.operation.type": "process",
			"messaging.consumer.group.name": "billing",
		} {
			if got := a[k].AsString(); got != want {
				t.Errorf("span of %s: %s = %q, want %q", eventID, k, got, want)
			}
		}
	}

	msg, producer := tracedMsg(tp, "flaky", "p")
	s := deliver(msg)
	checkSpan(s, producer, "flaky")
	a, ev := spanAttrs(s), spanEvents(s)
	if a["outboxkit.retry.attempts"].AsInt64() != 2 || a["outboxkit.inbox.duplicate"].AsBool() {
		t.Errorf("flaky: attempts %v, duplicate %v; want 2 attempts, not a duplicate", a["outboxkit.retry.attempts"], a["outboxkit.inbox.duplicate"])
	}
	if r, ok := ev["outboxkit.retry"]; !ok || r["outboxkit.retry.attempt"].AsInt64() != 2 || r["outboxkit.retry.error"].AsString() != "inbox billing: event flaky: handler: first attempt fails" {
		t.Errorf("flaky: events %v, want an outboxkit.retry event for attempt 2 with the first error", ev)
	}
	if s.Status.Code == codes.Error {
		t.Errorf("flaky: status %v, want no error: the retry succeeded", s.Status)
	}

	msg, producer = tracedMsg(tp, "flaky", "p (redelivered)")
	s = deliver(msg)
	checkSpan(s, producer, "flaky")
	a, ev = spanAttrs(s), spanEvents(s)
	if !a["outboxkit.inbox.duplicate"].AsBool() || a["outboxkit.inbox.consumer"].AsString() != "billing" || a["outboxkit.retry.attempts"].AsInt64() != 1 {
		t.Errorf("duplicate: attributes %v, want outboxkit.inbox.duplicate=true for consumer billing, 1 attempt", a)
	}
	if _, ok := ev["outboxkit.inbox.duplicate_skipped"]; !ok {
		t.Errorf("duplicate: events %v, want outboxkit.inbox.duplicate_skipped", ev)
	}

	msg, producer = tracedMsg(tp, "bad", "p")
	s = deliver(msg)
	checkSpan(s, producer, "bad")
	a, ev = spanAttrs(s), spanEvents(s)
	if !a["outboxkit.poisoned"].AsBool() || a["outboxkit.retry.attempts"].AsInt64() != 3 {
		t.Errorf("bad: attributes %v, want outboxkit.poisoned=true after 3 attempts", a)
	}
	if p, ok := ev["outboxkit.poisoned"]; !ok || p["outboxkit.poison.topic"].AsString() != "orders_poison" ||
		p["outboxkit.poison.reason"].AsString() != "inbox billing: event bad: handler: price service unavailable" {
		t.Errorf("bad: events %v, want outboxkit.poisoned with the topic and the reason", ev)
	}
	if len(poison.on("orders_poison")) != 1 {
		t.Errorf("%d messages on the poison topic, want 1", len(poison.on("orders_poison")))
	}

	// Without a trace context the delivery starts a trace of its own.
	s = deliver(eventMsg("untraced", "p"))
	if s.Parent.IsValid() || !s.SpanContext.IsValid() {
		t.Errorf("untraced: parent %v, want a new root span", s.Parent)
	}
}

// TestTracingOff: without a TracerProvider the middleware returns the handler itself, the
// handler sees no recording span, and RetryThenPoison and the Inbox record nothing.
func TestTracingOff(t *testing.T) {
	f := newFixture(t, databases()[2])
	rtp, err := middleware.RetryThenPoison(fastRetry(newGoChannel(t), "orders_poison", 1))
	if err != nil {
		t.Fatal(err)
	}
	var recording bool
	h := middleware.Tracing(middleware.TracingConfig{})(rtp(f.inbox.Handler(
		func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error) {
			recording = trace.SpanFromContext(ctx).IsRecording() || trace.SpanContextFromContext(ctx).IsValid()
			return nil, nil
		})))
	tp, _ := newTestTracer(t)
	msg, _ := tracedMsg(tp, "e-1", "p")
	before := len(msg.Metadata)
	if _, err := h(msg); err != nil {
		t.Fatal(err)
	}
	if recording {
		t.Error("the handler saw a span although tracing is off")
	}
	if len(msg.Metadata) != before {
		t.Errorf("metadata changed from %d to %d entries", before, len(msg.Metadata))
	}
}
