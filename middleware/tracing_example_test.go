package middleware_test

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/middleware"
)

// Tracing gives every delivery a consumer span, a child of the producer span whose W3C trace
// context the message carries (what the forwarder puts on every message it relays). Add it to
// the Router before RetryThenPoison: router.AddMiddleware(middleware.Tracing(cfg), retryPoison).
func ExampleTracing() {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	// A message as the forwarder sends it: the event id and the producer span's traceparent.
	producerCtx, producer := tp.Tracer("relay").Start(context.Background(), "send orders", trace.WithSpanKind(trace.SpanKindProducer))
	producer.End()
	msg := message.NewMessage("0193b1c4-0000-7000-8000-000000000001", []byte(`{"total":42}`))
	msg.Metadata.Set("event_id", msg.UUID)
	propagation.TraceContext{}.Inject(producerCtx, propagation.MapCarrier(msg.Metadata))

	handler := middleware.Tracing(middleware.TracingConfig{TracerProvider: tp, MessagingSystem: "kafka"})(
		func(msg *message.Message) ([]*message.Message, error) {
			_, span := tp.Tracer("app").Start(msg.Context(), "charge order") // nests under the consumer span
			span.End()
			return nil, nil
		})
	if _, err := handler(msg); err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range exporter.GetSpans() {
		fmt.Printf("%-12s %-8s same trace: %v\n", s.Name, s.SpanKind, s.SpanContext.TraceID() == producer.SpanContext().TraceID())
	}
	// Output:
	// send orders  producer same trace: true
	// charge order internal same trace: true
	// process      consumer same trace: true
}
