package middleware

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.27.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/outbox"
)

// TracerName is the instrumentation scope of the consumer spans.
const TracerName = "github.com/outboxkit/outboxkit/middleware"

// Attributes and events the consumer middleware records on the span of a delivery
// (docs/observability.md).
const (
	attrEventType      = attribute.Key("outboxkit.event.type")
	attrHandler        = attribute.Key("outboxkit.handler.name")
	attrInboxConsumer  = attribute.Key("outboxkit.inbox.consumer")
	attrInboxDuplicate = attribute.Key("outboxkit.inbox.duplicate")
	attrAttempts       = attribute.Key("outboxkit.retry.attempts")
	attrAttempt        = attribute.Key("outboxkit.retry.attempt")
	attrRetryError     = attribute.Key("outboxkit.retry.error")
	attrPoisoned       = attribute.Key("outboxkit.poisoned")
	attrPoisonTopic    = attribute.Key("outboxkit.poison.topic")
	attrPoisonReason   = attribute.Key("outboxkit.poison.reason")
	eventDuplicate     = "outboxkit.inbox.duplicate_skipped"
	eventRetry         = "outboxkit.retry"
	eventPoisoned      = "outboxkit.poisoned"
	eventPoisonFailed  = "outboxkit.poison_failed"
	consumerOperation  = "process"
)

// TracingConfig configures [Tracing].
type TracingConfig struct {
	// TracerProvider creates the consumer spans. Nil: Tracing returns the handler unchanged (no
	// spans, no cost). otel's global provider is never read.
	TracerProvider trace.TracerProvider
	// MessagingSystem is the messaging.system attribute, such as "kafka" or "pulsar". Default
	// "": left out.
	MessagingSystem string
	// ConsumerGroup is the messaging.consumer.group.name attribute (the Kafka consumer group, the
	// Pulsar subscription). Default "": left out.
	ConsumerGroup string
}

// Tracing returns a Watermill handler middleware that runs each delivery in an OpenTelemetry
// consumer span ("process <topic>"), a child of the producer span whose W3C trace context the
// message carries (the forwarder's span, or the writer's when the relay does not trace), or a
// new root without one. The span carries the messaging attributes (messaging.message.id is the
// event id) and the handler's error as its status; the handler gets the span in msg.Context(), so
// its own spans nest under it. Add it to the Router before RetryThenPoison, so that its span
// covers every attempt and RetryThenPoison and the Inbox can record retries, poisoning and
// skipped duplicates on it.
func Tracing(config TracingConfig) message.HandlerMiddleware {
	if config.TracerProvider == nil {
		return func(h message.HandlerFunc) message.HandlerFunc { return h }
	}
	tracer := config.TracerProvider.Tracer(TracerName)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ctx := msg.Context()
			topic := message.SubscribeTopicFromCtx(ctx)
			id := msg.Metadata.Get(outbox.MetadataEventID)
			if id == "" {
				id = msg.UUID
			}
			attrs := make([]attribute.KeyValue, 0, 9)
			if config.MessagingSystem != "" {
				attrs = append(attrs, semconv.MessagingSystemKey.String(config.MessagingSystem))
			}
			if config.ConsumerGroup != "" {
				attrs = append(attrs, semconv.MessagingConsumerGroupName(config.ConsumerGroup))
			}
			attrs = append(attrs,
				semconv.MessagingOperationName(consumerOperation),
				semconv.MessagingOperationTypeProcess,
				semconv.MessagingDestinationName(topic),
				semconv.MessagingMessageID(id),
				semconv.MessagingMessageBodySize(len(msg.Payload)),
				attrEventType.String(msg.Metadata.Get(outbox.MetadataEventType)),
				attrHandler.String(message.HandlerNameFromCtx(ctx)),
			)
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
			producer := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(msg.Metadata))
			if sc := trace.SpanContextFromContext(producer); sc.IsValid() {
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
			} else {
				opts = append(opts, trace.WithNewRoot())
			}
			name := consumerOperation
			if topic != "" {
				name += " " + topic
			}
			ctx, span := tracer.Start(ctx, name, opts...)
			defer span.End()
			msg.SetContext(ctx)
			produced, err := h(msg)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", err)))
			}
			return produced, err
		}
	}
}

// traceInbox records the inbox's verdict on the span in ctx, if one is recording: a duplicate
// delivery skipped without calling the handler, or a new event handed to it.
func traceInbox(ctx context.Context, consumer string, duplicate bool) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrInboxConsumer.String(consumer), attrInboxDuplicate.Bool(duplicate))
	if duplicate {
		span.AddEvent(eventDuplicate, trace.WithAttributes(attrInboxConsumer.String(consumer)))
	}
}

// retryTrace is what RetryThenPoison observed of one delivery, for its span.
type retryTrace struct {
	span     trace.Span
	attempts int
	last     error // the error of the latest attempt
	poison   error // the error handed to the poison queue, if any
}

type retryTraceKey struct{}

// traceRetryThenPoison composes poison(retry(h)) like RetryThenPoison does and, when the
// delivery's context holds a recording span (see [Tracing]), records on it every retry (an
// event per attempt after the first), the number of attempts, and whether the message was
// handed to the poison queue (with the reason). Without a recording span it adds no allocation:
// the per-delivery state is created only for a recording span.
func traceRetryThenPoison(poison, retry message.HandlerMiddleware, h message.HandlerFunc, shouldPoison func(error) bool, poisonTopic string) message.HandlerFunc {
	attempt := func(msg *message.Message) ([]*message.Message, error) {
		if rt, ok := msg.Context().Value(retryTraceKey{}).(*retryTrace); ok {
			rt.attempts++
			if rt.attempts > 1 && rt.last != nil {
				rt.span.AddEvent(eventRetry, trace.WithAttributes(attrAttempt.Int(rt.attempts), attrRetryError.String(rt.last.Error())))
			}
			produced, err := h(msg)
			rt.last = err
			return produced, err
		}
		return h(msg)
	}
	retried := retry(attempt)
	verdict := func(msg *message.Message) ([]*message.Message, error) {
		produced, err := retried(msg)
		if err != nil {
			if rt, ok := msg.Context().Value(retryTraceKey{}).(*retryTrace); ok && shouldPoison(err) {
				rt.poison = err
			}
		}
		return produced, err
	}
	inner := poison(verdict)
	return func(msg *message.Message) ([]*message.Message, error) {
		span := trace.SpanFromContext(msg.Context())
		if !span.IsRecording() {
			return inner(msg)
		}
		rt := &retryTrace{span: span}
		msg.SetContext(context.WithValue(msg.Context(), retryTraceKey{}, rt))
		produced, err := inner(msg)
		span.SetAttributes(attrAttempts.Int(rt.attempts))
		if rt.poison != nil {
			reason := trace.WithAttributes(attrPoisonTopic.String(poisonTopic), attrPoisonReason.String(rt.poison.Error()))
			if err == nil {
				span.SetAttributes(attrPoisoned.Bool(true))
				span.AddEvent(eventPoisoned, reason)
			} else {
				span.AddEvent(eventPoisonFailed, reason)
			}
		}
		return produced, err
	}
}
