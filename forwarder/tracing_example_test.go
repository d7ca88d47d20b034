package forwarder_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// With a TracerProvider, the forwarder gives each event a producer span, a child of the span the
// event was written in (the writer stores its traceparent with the event), and sends the
// producer span's context with the message: the consumer continues the writer's trace.
func ExampleConfig_tracerProvider() {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	defer cluster.Close()
	dir, _ := os.MkdirTemp("", "forwarder-tracing-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The application writes the event inside its own span: passing ctx is all it takes.
	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	_ = outbox.Migrate(ctx, db, writer.Table())
	writeCtx, span := tp.Tracer("orders").Start(ctx, "place order")
	tx, _ := db.BeginTx(writeCtx, nil)
	event, _ := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPlaced", map[string]int{"total": 42})
	_ = writer.WriteTx(writeCtx, tx, event)
	_ = tx.Commit()
	span.End()

	publisher, err := kafka.NewPublisher(kafka.Config{Brokers: cluster.ListenAddrs()}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer publisher.Close()
	fwd, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.SQLite, Publisher: publisher,
		TracerProvider: tp, MessagingSystem: "kafka", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- fwd.Run(runCtx) }()

	consumer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	record := consumer.PollRecords(ctx, 1).Records()[0]
	headers := propagation.MapCarrier{}
	for _, h := range record.Headers {
		headers[h.Key] = string(h.Value)
	}
	sent := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, headers))
	stop()
	fmt.Println("run:", <-done)

	for _, s := range exporter.GetSpans() {
		if s.SpanKind == trace.SpanKindProducer {
			fmt.Printf("%s: child of the writer's span: %v, its context on the message: %v\n", s.Name,
				s.Parent.SpanID() == span.SpanContext().SpanID(), sent.SpanID() == s.SpanContext.SpanID())
		}
	}
	// Output:
	// run: <nil>
	// send orders: child of the writer's span: true, its context on the message: true
}
