package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/outbox"
)

// storedHeaders reads back the headers column of one event.
func storedHeaders(t *testing.T, tg target, id string) map[string]string {
	t.Helper()
	var raw string
	if err := tg.db.QueryRow("SELECT headers FROM "+tg.writer.Table().Events()+" WHERE event_id = "+tg.ph(1), id).Scan(&raw); err != nil {
		t.Fatalf("read headers of %s: %v", id, err)
	}
	h := map[string]string{}
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		t.Fatalf("headers of %s: %v", id, err)
	}
	return h
}

// TestWriterStoresTraceContext: Write stores the W3C trace context of the caller's span with
// the event (replacing a traceparent and tracestate the event brought along), leaves the headers
// alone without a span, and Writer.Publisher does the same from each message's context.
func TestWriterStoresTraceContext(t *testing.T) {
	tg := newTarget(t, outbox.SQLite)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	state, err := trace.ParseTraceState("vendor=blue")
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tp.Tracer("test").Start(context.Background(), "place order")
	defer span.End()
	ctx = trace.ContextWithSpanContext(ctx, span.SpanContext().WithTraceState(state))
	sc := trace.SpanContextFromContext(ctx)

	traced := orderEvent("o-1", 1)
	traced.Headers["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traced.Headers["tracestate"] = "stale=1"
	if err := tg.placeOrder(ctx, "o-1", true, traced); err != nil {
		t.Fatal(err)
	}
	h := storedHeaders(t, tg, traced.ID.String())
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(h)))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() {
		t.Fatalf("stored headers %v, want the caller's span %v", h, sc)
	}
	if h["tracestate"] != "vendor=blue" || h["content-type"] != "application/json" {
		t.Fatalf("stored headers %v: want tracestate vendor=blue and the event's own headers", h)
	}

	plain := orderEvent("o-2", 1)
	if err := tg.placeOrder(context.Background(), "o-2", true, plain); err != nil {
		t.Fatal(err)
	}
	if h := storedHeaders(t, tg, plain.ID.String()); h["traceparent"] != "" || h["tracestate"] != "" {
		t.Fatalf("an event written without a span got trace headers: %v", h)
	}

	// Through the Watermill publisher, from the message's own context.
	tx, err := tg.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	pub, err := tg.writer.Publisher(wsql.TxFromStdSQL(tx))
	if err != nil {
		t.Fatal(err)
	}
	msg := orderEvent("o-3", 1).ToMessage()
	msg.SetContext(ctx)
	if err := pub.Publish("orders.events", msg); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	h = storedHeaders(t, tg, msg.UUID)
	got = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(h)))
	if got.SpanID() != sc.SpanID() {
		t.Fatalf("Publisher stored %v, want the message context's span %v", h, sc)
	}
}
