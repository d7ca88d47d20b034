package forwarder

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.27.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/outbox"
)

// TracerName is the instrumentation scope of the forwarder's spans.
const TracerName = "github.com/outboxkit/outboxkit/forwarder"

// Attributes of the producer spans beyond the messaging semantic conventions (docs/observability.md).
const (
	attrEventType     = attribute.Key("outboxkit.event.type")
	attrAggregateType = attribute.Key("outboxkit.aggregate.type")
	attrAggregateID   = attribute.Key("outboxkit.aggregate.id")
	attrTenantID      = attribute.Key("outboxkit.tenant.id")
	attrDeadLetter    = attribute.Key("outboxkit.dead_letter")
	attrAttempts      = attribute.Key("outboxkit.attempts")
)

// errNoOutcome is the span error of a message a publisher returned no outcome for.
var errNoOutcome = errors.New("forwarder: the publisher returned no outcome for this message")

// Why one span per event rather than one per batch with links: the span is a child of the
// writer's span (read from the event's stored traceparent), so the trace of the request that
// wrote the event continues through the relay to the consumers, under one trace id. A batch span
// can have only one parent, so it would start a trace of its own and leave the events' traces
// joined by links only, which most trace views do not follow. A sampler honouring the parent's
// decision (the SDK's default, ParentBased) keeps or drops the relay's span with its writer's.

// tracePublisher returns pub wrapped so that every publish call starts one producer span per
// message and records its outcome, or pub itself when tp is nil (no spans, no cost). The wrapper
// has PublishEach when pub has it. It sees every publish call the forwarder makes (whole
// batches, one-by-one isolation, confirmations, dead letters) with its real destination and
// outcome, which no single place inside the forwarder does. An optional publisher interface the
// forwarder starts to use must be forwarded here too.
func tracePublisher(pub message.Publisher, tp trace.TracerProvider, system, deadLetterTopic string) message.Publisher {
	if pub == nil || tp == nil {
		return pub
	}
	switch pub.(type) {
	case *tracedPublisher, *tracedOutcomePublisher, *tracedTransactionalPublisher:
		return pub
	}
	t := &tracedPublisher{
		pub:             pub,
		tracer:          tp.Tracer(TracerName),
		system:          system,
		deadLetterTopic: deadLetterTopic,
	}
	// The decorator of pub's capabilities: a transactional publisher with outcomes, a publisher
	// with outcomes, or a plain one.
	switch p := pub.(type) {
	case interface {
		TransactionalPublisher
		OutcomePublisher
	}:
		return &tracedTransactionalPublisher{tracedOutcomePublisher: &tracedOutcomePublisher{tracedPublisher: t, each: p}, tx: p}
	case OutcomePublisher:
		return &tracedOutcomePublisher{tracedPublisher: t, each: p}
	}
	return t
}

// tracedPublisher traces a plain message.Publisher: one error per call ends every span of it.
type tracedPublisher struct {
	pub             message.Publisher
	tracer          trace.Tracer
	system          string
	deadLetterTopic string
}

// tracedOutcomePublisher traces an OutcomePublisher: each span ends with its message's outcome.
type tracedOutcomePublisher struct {
	*tracedPublisher
	each OutcomePublisher
}

// Publish implements message.Publisher.
func (p *tracedPublisher) Publish(topic string, msgs ...*message.Message) error {
	traced, spans := p.start(topic, msgs)
	err := p.pub.Publish(topic, traced...)
	for _, span := range spans {
		endSpan(span, err)
	}
	return err
}

// Close implements message.Publisher.
func (p *tracedPublisher) Close() error { return p.pub.Close() }

// Retriable implements ErrorClassifier with the wrapped publisher's classifier (every error is
// retriable when it has none, as Config.IsRetriable's default).
func (p *tracedPublisher) Retriable(err error) bool { return defaultClassifier(p.pub)(err) }

// Unavailable implements OutageClassifier with the wrapped publisher's (false when it has none).
func (p *tracedPublisher) Unavailable(err error) bool {
	c := outageClassifierOf(p.pub)
	return c != nil && c(err)
}

// PublishEach implements OutcomePublisher.
func (p *tracedOutcomePublisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	traced, spans := p.start(topic, msgs)
	errs := p.each.PublishEach(ctx, topic, traced)
	for i, span := range spans {
		err := errNoOutcome
		if len(errs) == len(msgs) {
			err = errs[i]
		}
		endSpan(span, err)
	}
	return errs
}

// tracedTransactionalPublisher traces a TransactionalPublisher (that is also an
// OutcomePublisher, as brokers/kafka's is): CommitUnit gives each message of the transaction a
// producer span, ended with the message's own error, or the transaction's, or none when it
// committed. The checkpoint record gets no span: it is the relay's bookkeeping, not an event.
type tracedTransactionalPublisher struct {
	*tracedOutcomePublisher
	tx TransactionalPublisher
}

// OpenUnit implements TransactionalPublisher.
func (p *tracedTransactionalPublisher) OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error) {
	return p.tx.OpenUnit(ctx, unit, checkpointTopic, slot)
}

// CommitUnit implements TransactionalPublisher.
func (p *tracedTransactionalPublisher) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message,
	checkpoint []byte) ([]error, error) {
	traced := make([]*message.Message, len(msgs))
	spans := make([]trace.Span, len(msgs))
	for i, msg := range msgs {
		traced[i], spans[i] = p.startOne(topics[i], msg)
	}
	errs, txErr := p.tx.CommitUnit(ctx, unit, topics, traced, checkpoint)
	for i, span := range spans {
		err := txErr
		if len(errs) == len(msgs) && errs[i] != nil {
			err = errs[i]
		}
		endSpan(span, err)
	}
	return errs, txErr
}

// CloseUnit implements TransactionalPublisher.
func (p *tracedTransactionalPublisher) CloseUnit(unit string) { p.tx.CloseUnit(unit) }

// start begins a producer span per message and returns copies of the messages carrying the
// span's context (in their context and as W3C trace headers), leaving the caller's messages
// untouched: a message published again (after a failed batch) gets a new span, again a child of
// the writer's span rather than of its failed attempt.
func (p *tracedPublisher) start(topic string, msgs []*message.Message) ([]*message.Message, []trace.Span) {
	traced := make([]*message.Message, len(msgs))
	spans := make([]trace.Span, len(msgs))
	for i, msg := range msgs {
		traced[i], spans[i] = p.startOne(topic, msg)
	}
	return traced, spans
}

// startOne begins the producer span of one message to topic and returns a copy of the message
// carrying the span's context.
func (p *tracedPublisher) startOne(topic string, msg *message.Message) (*message.Message, trace.Span) {
	ctx, span := p.startSpan("send "+topic, topic, msg)
	c := msg.Copy()
	c.SetContext(ctx)
	delete(c.Metadata, outbox.HeaderTraceParent)
	delete(c.Metadata, outbox.HeaderTraceState)
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(c.Metadata))
	return c, span
}

// startSpan begins the producer span of msg, named name: a child of the writer's span context read from the
// message's stored traceparent, or a new root when the event has none.
func (p *tracedPublisher) startSpan(name, topic string, msg *message.Message) (context.Context, trace.Span) {
	md := msg.Metadata
	attrs := make([]attribute.KeyValue, 0, 12)
	if p.system != "" {
		attrs = append(attrs, semconv.MessagingSystemKey.String(p.system))
	}
	attrs = append(attrs,
		semconv.MessagingOperationName("send"),
		semconv.MessagingOperationTypePublish,
		semconv.MessagingDestinationName(topic),
		semconv.MessagingMessageID(msg.UUID),
		semconv.MessagingMessageBodySize(len(msg.Payload)),
		attrEventType.String(md.Get(outbox.MetadataEventType)),
		attrAggregateType.String(md.Get(outbox.MetadataAggregateType)),
		attrAggregateID.String(md.Get(outbox.MetadataAggregateID)),
	)
	if p.system == "kafka" {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(md.Get(outbox.MetadataAggregateID)))
	}
	if tenant := md.Get(outbox.MetadataTenantID); tenant != "" {
		attrs = append(attrs, attrTenantID.String(tenant))
	}
	if topic == p.deadLetterTopic {
		attrs = append(attrs, attrDeadLetter.Bool(true), attrAttempts.String(md.Get(MetadataAttempts)))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...)}
	ctx := msg.Context()
	writer := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(md))
	if sc := trace.SpanContextFromContext(writer); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	return p.tracer.Start(ctx, name, opts...)
}

// endSpan records err (status error, an exception event, error.type) and ends span.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", err)))
	}
	span.End()
}
