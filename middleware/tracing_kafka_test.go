package middleware_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	okkafka "github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/middleware"
	"github.com/outboxkit/outboxkit/outbox"
)

// EnvWriteTraceSVG, set to 1, makes TestOneTraceFromWriterToHandler write the trace it checked
// to docs/trace-example.svg (and its text tree to docs/trace-example.txt).
const EnvWriteTraceSVG = "OUTBOXKIT_TEST_WRITE_TRACE_SVG"

// TestOneTraceFromWriterToHandler follows one event through the whole path with tracing on:
// written on PostgreSQL inside an application span, relayed by the forwarder to the real Kafka,
// consumed by a Watermill Router with the project's Kafka subscriber, Tracing, RetryThenPoison
// and the Inbox (the handler fails once, then succeeds). The OTel SDK's in-memory exporter must
// then hold one trace: writer span → producer span (send) → consumer span (process) → the
// handler's own spans, each the parent of the next, all with the event id where they describe
// the message. It fails if the writer does not store the traceparent (the producer span would be
// a root) or if the forwarder does not put its span's context on the message (the consumer span
// would be a child of the writer span).
func TestOneTraceFromWriterToHandler(t *testing.T) {
	t.Parallel()
	brokers := testsupport.KafkaBrokers(t)
	db := testsupport.OpenPostgres(t)
	tp, exp := newTestTracer(t)
	app := tp.Tracer("app")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	writer := testsupport.NewOutbox(t, db, outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("traced_outbox")})
	tbl := writer.Table()
	inboxTable := testsupport.UniqueName("traced_inbox")
	inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: middleware.DialectPostgres,
		Table: inboxTable, ConsumerName: "billing"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTables(db, inboxTable, inbox.MigrationsTable()) })
	if err := inbox.Migrate(ctx); err != nil {
		t.Fatalf("migrate inbox: %v", err)
	}
	topic := testsupport.UniqueName("traced_orders")
	group := topic + "_billing"

	// 1. The application writes the event inside its own span.
	event, err := outbox.NewJSONEvent(topic, "order", "o-42", "OrderPlaced", map[string]int{"total": 42})
	if err != nil {
		t.Fatal(err)
	}
	event.ID = uuid.Must(uuid.NewV7())
	eventID := event.ID.String()
	writeCtx, writeSpan := app.Start(ctx, "place order")
	tx, err := db.BeginTx(writeCtx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.WriteTx(writeCtx, tx, event); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	writeSpan.End()
	writerSC := writeSpan.SpanContext()

	// The row holds the writer span's trace context.
	var headerJSON string
	if err := db.QueryRowContext(ctx, "SELECT headers::text FROM "+tbl.Events()+" WHERE event_id = $1", eventID).Scan(&headerJSON); err != nil {
		t.Fatalf("read the stored headers: %v", err)
	}
	var headers map[string]string
	if err := json.Unmarshal([]byte(headerJSON), &headers); err != nil {
		t.Fatal(err)
	}
	stored := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(headers)))
	if stored.TraceID() != writerSC.TraceID() || stored.SpanID() != writerSC.SpanID() {
		t.Fatalf("stored headers %v do not carry the writer's span %v", headers, writerSC)
	}

	// 2. The forwarder relays it to the real Kafka.
	pub, err := okkafka.NewPublisher(okkafka.Config{Brokers: brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	fwd, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.Postgres, Table: tbl.Events(), Publisher: pub,
		TracerProvider: tp, MessagingSystem: "kafka", MinPollInterval: 10 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- fwd.Run(runCtx) }()
	t.Cleanup(func() {
		stopRelay()
		if err := <-relayDone; err != nil {
			t.Errorf("forwarder: %v", err)
		}
	})

	// 3. A Router consumes it with the project's Kafka subscriber and the consumer middleware.
	sub, err := okkafka.NewSubscriber(okkafka.Config{Brokers: brokers, ConsumerGroup: group}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	rtp, err := middleware.RetryThenPoison(fastRetry(pub, topic+"_poison", 3))
	if err != nil {
		t.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	router.AddMiddleware(
		middleware.Tracing(middleware.TracingConfig{TracerProvider: tp, MessagingSystem: "kafka", ConsumerGroup: group}),
		rtp)
	var attempts atomic.Int32
	handled := make(chan string, 4)
	router.AddConsumerHandler("billing", topic, sub, inbox.ConsumerHandler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) error {
		_, span := app.Start(ctx, "charge order")
		defer span.End()
		if attempts.Add(1) == 1 {
			return errors.New("payment service timed out")
		}
		handled <- msg.Metadata.Get(outbox.MetadataEventID)
		return nil
	}))
	runRouter(t, router)

	select {
	case id := <-handled:
		if id != eventID {
			t.Fatalf("handled event %s, want %s", id, eventID)
		}
	case <-ctx.Done():
		t.Fatal("the event was not handled within 3 minutes")
	}
	// The consumer span ends when the handler chain returns, just after the handler; the
	// producer span when the publish call returns, which a loaded machine may delay past the
	// consumption: wait for both.
	var spans tracetest.SpanStubs
	for {
		spans = exp.GetSpans()
		if consumerSpans(spans) > 0 && okProducerSpans(spans, topic) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no consumer span exported; spans: %v", spanNames(spans))
		case <-time.After(20 * time.Millisecond):
		}
	}

	// 4. One trace, each span the parent of the next.
	var producer, consumer tracetest.SpanStub
	var handlerSpans []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanContext.TraceID() != writerSC.TraceID() {
			t.Errorf("span %q is in trace %s, want the writer's trace %s", s.Name, s.SpanContext.TraceID(), writerSC.TraceID())
		}
		switch {
		case s.SpanKind == trace.SpanKindProducer && spanAttrs(s)["messaging.destination.name"].AsString() == topic &&
			s.Status.Code != codes.Error: // a failed attempt (none expected) would have a span of its own
			producer = s
		case s.SpanKind == trace.SpanKindConsumer && !consumer.SpanContext.IsValid():
			consumer = s // the first delivery (a redelivery after a rebalance would be a skipped duplicate)
		case s.Name == "charge order":
			handlerSpans = append(handlerSpans, s)
		}
	}
	if !producer.SpanContext.IsValid() {
		t.Fatalf("no producer span for topic %s; spans: %v", topic, spanNames(spans))
	}
	if producer.Parent.SpanID() != writerSC.SpanID() {
		t.Errorf("producer span's parent is %s, want the writer's span %s (is the traceparent stored and read?)", producer.Parent.SpanID(), writerSC.SpanID())
	}
	if consumer.Parent.SpanID() != producer.SpanContext.SpanID() {
		t.Errorf("consumer span's parent is %s, want the producer span %s (does the forwarder put its context on the message?)",
			consumer.Parent.SpanID(), producer.SpanContext.SpanID())
	}
	if len(handlerSpans) != 2 {
		t.Errorf("%d handler spans, want 2 (a failed attempt and a retry)", len(handlerSpans))
	}
	for _, h := range handlerSpans {
		if h.Parent.SpanID() != consumer.SpanContext.SpanID() {
			t.Errorf("handler span's parent is %s, want the consumer span %s", h.Parent.SpanID(), consumer.SpanContext.SpanID())
		}
	}
	pa, ca := spanAttrs(producer), spanAttrs(consumer)
	for _, check := range []struct {
		span, key, got, want string
	}{
		{"producer", "messaging.message.id", pa["messaging.message.id"].AsString(), eventID},
		{"producer", "messaging.system", pa["messaging.system"].AsString(), "kafka"},
		{"producer", "messaging.kafka.message.key", pa["messaging.kafka.message.key"].AsString(), "o-42"},
		{"producer", "messaging.operation.type", pa["messaging.operation.type"].AsString(), "publish"},
		{"consumer", "messaging.message.id", ca["messaging.message.id"].AsString(), eventID},
		{"consumer", "messaging.destination.name", ca["messaging.destination.name"].AsString(), topic},
		{"consumer", "messaging.consumer.group.name", ca["messaging.consumer.group.name"].AsString(), group},
		{"consumer", "messaging.operation.type", ca["messaging.operation.type"].AsString(), "process"},
	} {
		if check.got != check.want {
			t.Errorf("%s span: %s = %q, want %q", check.span, check.key, check.got, check.want)
		}
	}
	if n := ca["outboxkit.retry.attempts"].AsInt64(); n != 2 {
		t.Errorf("consumer span: outboxkit.retry.attempts = %d, want 2", n)
	}
	if _, ok := spanEvents(consumer)["outboxkit.retry"]; !ok {
		t.Errorf("consumer span has no outboxkit.retry event: %v", consumer.Events)
	}
	if ca["outboxkit.inbox.duplicate"].AsBool() {
		t.Error("consumer span says duplicate; the event was new")
	}

	tree := textTree(spans)
	t.Logf("exported trace:\n%s", tree)
	if os.Getenv(EnvWriteTraceSVG) == "1" {
		for name, content := range map[string]string{"trace-example.svg": traceSVG(spans), "trace-example.txt": tree} {
			if err := os.WriteFile(filepath.Join("..", "docs", name), []byte(content), 0o644); err != nil {
				t.Fatalf("write docs/%s: %v", name, err)
			}
		}
	}
}

func consumerSpans(spans tracetest.SpanStubs) int {
	n := 0
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindConsumer {
			n++
		}
	}
	return n
}

// okProducerSpans counts the producer spans of topic that did not fail.
func okProducerSpans(spans tracetest.SpanStubs, topic string) int {
	n := 0
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindProducer && s.Status.Code != codes.Error &&
			spanAttrs(s)["messaging.destination.name"].AsString() == topic {
			n++
		}
	}
	return n
}

func spanNames(spans tracetest.SpanStubs) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	return names
}
