package outbox

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the W3C Trace Context (https://www.w3.org/TR/trace-context/) the writer stores
// with an event: the trace of the transaction that wrote it. They are ordinary headers: the
// forwarder sends them to the broker (replaced by its own producer span's context when it traces),
// and the consumer middleware reads them.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// injectTraceContext stores the W3C trace context of ctx's span in md. Without a valid span in
// ctx, md is left as it is, so a trace context the message already carries is kept; with one, it
// replaces any earlier traceparent and tracestate (a stale tracestate never travels with a new
// traceparent). It uses the W3C propagator directly, never otel's global one.
func injectTraceContext(ctx context.Context, md message.Metadata) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	delete(md, HeaderTraceState)
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(md))
}
