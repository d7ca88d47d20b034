package forwarder

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/forwarder/internal/atleastonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// fakePublisher records what it was given and fails the messages whose payload is "fail".
type fakePublisher struct {
	mu  sync.Mutex
	got []*message.Message
}

var errRefused = errors.New("refused by the fake broker")

func (p *fakePublisher) Publish(_ string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, msgs...)
	for _, m := range msgs {
		if string(m.Payload) == "fail" {
			return errRefused
		}
	}
	return nil
}

func (p *fakePublisher) Close() error { return nil }

// fakeOutcomePublisher is fakePublisher with per-message outcomes.
type fakeOutcomePublisher struct{ fakePublisher }

func (p *fakeOutcomePublisher) PublishEach(_ context.Context, _ string, msgs []*message.Message) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, msgs...)
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if string(m.Payload) == "fail" {
			errs[i] = errRefused
		}
	}
	return errs
}

func testTracer(t testing.TB) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// tracedRecord is a record whose event was written under a span of tp (its traceparent stored in
// the headers, as outbox.Writer does), or without one when tp is nil.
func tracedRecord(tp trace.TracerProvider, key, payload string) (relay.Record, trace.SpanContext) {
	e := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: "orders", AggregateType: "order", AggregateID: key,
		EventType: "OrderPlaced", Payload: []byte(payload), Headers: map[string]string{"content-type": "application/json"}}
	var sc trace.SpanContext
	if tp != nil {
		ctx, span := tp.Tracer("test").Start(context.Background(), "place order")
		span.End()
		sc = span.SpanContext()
		propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(e.Headers))
	}
	return relay.Record{Event: e, KeyHash: outbox.KeyHash("", e.AggregateType, key)}, sc
}

func attrsOf(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// spanOf finds the exported span of an event id.
func spanOf(t *testing.T, spans tracetest.SpanStubs, id uuid.UUID) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if attrsOf(s)["messaging.message.id"].AsString() == id.String() {
			return s
		}
	}
	t.Fatalf("no span with messaging.message.id %s among %d spans", id, len(spans))
	return tracetest.SpanStub{}
}

// TestTracedPublisher checks the producer spans on both publisher shapes: one span per message,
// a child of the writer's span from the stored traceparent (a root without one), the messaging
// attributes, failures recorded, the span's context on the message handed to the publisher, and
// the caller's message left untouched.
func TestTracedPublisher(t *testing.T) {
	for _, shape := range []string{"outcome", "plain"} {
		t.Run(shape, func(t *testing.T) {
			tp, exp := testTracer(t)
			var inner message.Publisher = &fakePublisher{}
			if shape == "outcome" {
				inner = &fakeOutcomePublisher{}
			}
			pub := tracePublisher(inner, tp, "kafka", DefaultDeadLetterTopic)
			ok, fail := "ok", "ok"
			if shape == "outcome" {
				fail = "fail"
			}
			r1, writer := tracedRecord(tp, "o-1", ok)
			r2, _ := tracedRecord(nil, "o-2", fail)
			exp.Reset() // the writer's span
			msgs := relay.Messages(context.Background(), []relay.Record{r1, r2})
			var errs []error
			if each, isEach := pub.(OutcomePublisher); shape == "outcome" {
				if !isEach {
					t.Fatal("the traced publisher of an OutcomePublisher has no PublishEach")
				}
				errs = each.PublishEach(context.Background(), "orders", msgs)
			} else {
				if _, isEach := pub.(OutcomePublisher); isEach {
					t.Fatal("the traced publisher of a plain publisher has PublishEach")
				}
				errs = []error{pub.Publish("orders", msgs...)}
			}
			spans := exp.GetSpans()
			if len(spans) != 2 {
				t.Fatalf("%d spans, want one per message", len(spans))
			}
			s1, s2 := spanOf(t, spans, r1.Event.ID), spanOf(t, spans, r2.Event.ID)
			if s1.Parent.SpanID() != writer.SpanID() || s1.SpanContext.TraceID() != writer.TraceID() {
				t.Errorf("span of a traced event: parent %v, want the writer's span %v", s1.Parent, writer)
			}
			if s2.Parent.IsValid() {
				t.Errorf("span of an untraced event has parent %v, want a root", s2.Parent)
			}
			a := attrsOf(s1)
			for k, want := range map[attribute.Key]string{
				"messaging.system": "kafka", "messaging.destination.name": "orders", "messaging.operation.type": "publish",
				"messaging.operation.name": "send", "messaging.kafka.message.key": "o-1", "outboxkit.event.type": "OrderPlaced",
			} {
				if got := a[k].AsString(); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if s1.Name != "send orders" || s1.SpanKind != trace.SpanKindProducer {
				t.Errorf("span %q kind %v, want producer span \"send orders\"", s1.Name, s1.SpanKind)
			}
			if shape == "outcome" {
				if s1.Status.Code == codes.Error || s2.Status.Code != codes.Error || len(s2.Events) == 0 || s2.Events[0].Name != "exception" {
					t.Errorf("statuses %v and %v (events %v), want only the refused message's span in error with an exception event",
						s1.Status, s2.Status, s2.Events)
				}
				if errs[0] != nil || !errors.Is(errs[1], errRefused) {
					t.Errorf("outcomes %v, want the inner publisher's", errs)
				}
			} else if errs[0] != nil || s1.Status.Code == codes.Error {
				t.Errorf("plain publish: %v, status %v; want success", errs[0], s1.Status)
			}

			var got []*message.Message
			switch p := inner.(type) {
			case *fakePublisher:
				got = p.got
			case *fakeOutcomePublisher:
				got = p.got
			}
			for i, m := range got {
				want := []tracetest.SpanStub{s1, s2}[i].SpanContext
				sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(m.Metadata)))
				if sc.SpanID() != want.SpanID() || sc.TraceID() != want.TraceID() {
					t.Errorf("message %d carries trace context %v, want its producer span %v", i, sc, want)
				}
				if trace.SpanContextFromContext(m.Context()).SpanID() != want.SpanID() {
					t.Errorf("message %d's context does not hold its producer span", i)
				}
			}
			if msgs[0].Metadata.Get(outbox.HeaderTraceParent) != r1.Event.Headers[outbox.HeaderTraceParent] || msgs[1].Metadata.Get(outbox.HeaderTraceParent) != "" {
				t.Error("the forwarder's own messages were changed")
			}
		})
	}
}

// TestTracedPublisherPlainFailure: a plain publisher's one error ends every span of the call in
// error; a dead letter's span says so.
func TestTracedPublisherPlainFailure(t *testing.T) {
	tp, exp := testTracer(t)
	pub := tracePublisher(&fakePublisher{}, tp, "pulsar", "dlq")
	r1, _ := tracedRecord(tp, "o-1", "ok")
	r2, _ := tracedRecord(tp, "o-2", "fail")
	exp.Reset() // the writers' spans
	if err := pub.Publish("orders", relay.Messages(context.Background(), []relay.Record{r1, r2})...); !errors.Is(err, errRefused) {
		t.Fatalf("publish: %v, want the inner error", err)
	}
	for _, s := range exp.GetSpans() {
		if s.Status.Code != codes.Error {
			t.Errorf("span %s: status %v, want error", s.Name, s.Status)
		}
		if _, has := attrsOf(s)["messaging.kafka.message.key"]; has {
			t.Errorf("span %s of a pulsar publisher has a Kafka key", s.Name)
		}
	}
	exp.Reset()
	dead := relay.Messages(context.Background(), []relay.Record{r1})[0]
	dead.Metadata.Set(MetadataAttempts, "10")
	if err := pub.Publish("dlq", dead); err != nil {
		t.Fatal(err)
	}
	a := attrsOf(exp.GetSpans()[0])
	if !a["outboxkit.dead_letter"].AsBool() || a["outboxkit.attempts"].AsString() != "10" || a["messaging.destination.name"].AsString() != "dlq" {
		t.Errorf("dead letter span attributes %v", a)
	}
}

// TestTracingOffLeavesThePublisherAlone: without a TracerProvider the forwarder uses the given
// publisher itself; with one, a wrapper, and New never wraps twice.
func TestTracingOffLeavesThePublisherAlone(t *testing.T) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	inner := &fakeOutcomePublisher{}
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: inner})
	if err != nil {
		t.Fatal(err)
	}
	if f.cfg.Publisher != message.Publisher(inner) {
		t.Fatalf("tracing off: the forwarder publishes through %T, want the given publisher", f.cfg.Publisher)
	}
	tp, _ := testTracer(t)
	f, err = New(Config{DB: db, Dialect: outbox.SQLite, Publisher: inner, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.cfg.Publisher.(*tracedOutcomePublisher); !ok {
		t.Fatalf("tracing on: the forwarder publishes through %T", f.cfg.Publisher)
	}
	if again := tracePublisher(f.cfg.Publisher, tp, "", ""); again != f.cfg.Publisher {
		t.Fatal("a traced publisher was wrapped again")
	}
}

// BenchmarkPublishTracing measures the forwarder's publish path (messages built from 100 claimed
// records of 100 keys, one PublishEach call into a publisher that does nothing) with tracing
// off, with an SDK provider that samples nothing, and with an SDK provider sampling every event
// into a no-op exporter through the usual batch span processor. The sub-benchmarks per variant
// give ns/op and allocs/op; "interleaved" runs the three variants one after the other in every
// iteration, so that they share the machine's noise, and reports each one's ns/event and their
// ratios to tracing off:
//
//	go test -run '^$' -bench BenchmarkPublishTracing -benchmem -count 3 ./forwarder/
func BenchmarkPublishTracing(b *testing.B) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	writerTP := sdktrace.NewTracerProvider() // only to give the events a sampled traceparent
	records := make([]relay.Record, 100)
	for i := range records {
		records[i], _ = tracedRecord(writerTP, fmt.Sprintf("o-%d", i), string(make([]byte, 256)))
	}
	variants := []struct {
		name string
		tp   *sdktrace.TracerProvider
	}{
		{"off", nil},
		{"sdk-sample-none", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))},
		{"sdk-noop-exporter", sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))},
	}
	forwarders := make([]*Forwarder, len(variants))
	for i, v := range variants {
		cfg := Config{DB: db, Dialect: outbox.SQLite, Publisher: &discardPublisher{},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if v.tp != nil {
			defer func() { _ = v.tp.Shutdown(context.Background()) }()
			cfg.TracerProvider = v.tp
		}
		if forwarders[i], err = New(cfg); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	publish := func(b *testing.B, f *Forwarder) {
		if acked, failed := atleastonce.Publish(ctx, f.publisher, f.metrics, f.log, records); len(acked) != len(records) || len(failed) != 0 {
			b.Fatalf("%d acked, %d failed", len(acked), len(failed))
		}
	}
	for i, v := range variants {
		b.Run("tracing="+v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				publish(b, forwarders[i])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(records)), "ns/event")
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		spent := make([]time.Duration, len(variants))
		n := 0
		for b.Loop() {
			for i := range variants {
				start := time.Now()
				publish(b, forwarders[i])
				spent[i] += time.Since(start)
			}
			n++
		}
		events := float64(n * len(records))
		for i, v := range variants {
			b.ReportMetric(float64(spent[i].Nanoseconds())/events, v.name+"-ns/event")
			if i > 0 {
				b.ReportMetric(float64(spent[i])/float64(spent[0]), v.name+"/off")
			}
		}
	})
}

// discardPublisher acknowledges everything at once.
type discardPublisher struct{}

func (discardPublisher) Publish(string, ...*message.Message) error { return nil }
func (discardPublisher) Close() error                              { return nil }
func (discardPublisher) PublishEach(_ context.Context, _ string, msgs []*message.Message) []error {
	return make([]error, len(msgs))
}
