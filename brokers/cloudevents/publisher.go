package cloudevents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// The metadata keys the publisher sets: the CloudEvents attributes with the ce_ prefix of the
// Kafka protocol binding's binary content mode, and its content-type header.
const (
	// AttrID is the event id: outbox.MetadataEventID (the message UUID when absent).
	AttrID = "ce_id"
	// AttrType is the event type: outbox.MetadataEventType.
	AttrType = "ce_type"
	// AttrSource is Config.Source.
	AttrSource = "ce_source"
	// AttrSubject is the aggregate id: outbox.MetadataAggregateID, omitted when empty.
	AttrSubject = "ce_subject"
	// AttrTime is the event's creation time, outbox.MetadataCreatedAt, in RFC 3339 (UTC);
	// omitted when the message has none.
	AttrTime = "ce_time"
	// AttrSpecVersion is SpecVersion.
	AttrSpecVersion = "ce_specversion"
	// ContentType is the binding's header for the datacontenttype attribute, copied from the
	// message's own content-type header (matched case-insensitively), when it has one.
	ContentType = "content-type"
)

// SpecVersion is the CloudEvents specification version the messages follow.
const SpecVersion = "1.0"

// ErrNotAnEvent marks a message that cannot be a CloudEvent: nil, without an event type or an
// id, or with a created_at that is not an RFC 3339 time. It is a property of the message, so
// sending it again fails the same way.
var ErrNotAnEvent = errors.New("cloudevents: message is not an outbox event")

// ErrEarlierMessageInvalid marks a message of a PublishEach call that was not sent because an
// earlier message of the call is not an event (ErrNotAnEvent): the message itself is fine and can
// be sent again.
var ErrEarlierMessageInvalid = errors.New("cloudevents: not sent because an earlier message of the call is not an event")

// outcomePublisher is forwarder.OutcomePublisher, repeated here so that brokers do not import
// the forwarder.
type outcomePublisher interface {
	PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
}

// connector is the optional Connect method of brokers/pulsar's publisher, which the relay calls
// at start to find an unreachable broker early.
type connector interface {
	Connect(topic string) error
}

// NewPublisher returns a publisher that sends every message through pub as a CloudEvent in
// binary content mode: a copy of the message with the ce_* attributes and content-type added to
// its metadata (the message passed in is not modified; its other metadata, payload, UUID and
// context are kept). The result has PublishEach when pub has it (so the forwarder keeps its
// per-message outcomes), Connect when pub has it, and the transactions of exactly-once delivery
// (forwarder.TransactionalPublisher) when pub has them beside PublishEach (brokers/kafka). It always has Retriable, the forwarder's
// error classifier: ErrNotAnEvent is permanent, ErrEarlierMessageInvalid retriable, any other
// error is classified by pub's Retriable when pub has one. Close closes pub.
//
// Publish checks every message before sending any and returns an error wrapping ErrNotAnEvent
// when one is not an event. PublishEach fails such a message alone with ErrNotAnEvent and the
// later messages of its key with ErrEarlierMessageInvalid, which keeps the failures gapless per
// key, and sends the others.
func NewPublisher(pub message.Publisher, config Config) (message.Publisher, error) {
	if pub == nil {
		return nil, errors.New("cloudevents: wrapped publisher is nil")
	}
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("cloudevents: %w", err)
	}
	base := &publisher{pub: pub, source: config.Source}
	each, hasEach := pub.(outcomePublisher)
	conn, hasConnect := pub.(connector)
	tx, hasTx := pub.(transactionalPublisher)
	switch {
	case hasEach && hasTx && !hasConnect:
		return &eachTransactionalPublisher{eachPublisher{base, each}, tx}, nil
	case hasEach && hasConnect:
		return &eachConnectPublisher{eachPublisher{base, each}, conn}, nil
	case hasEach:
		return &eachPublisher{base, each}, nil
	case hasConnect:
		return &connectPublisher{base, conn}, nil
	}
	return base, nil
}

// publisher is the decorator for a plain message.Publisher.
type publisher struct {
	pub    message.Publisher
	source string
}

// Publish converts msgs and publishes them through the wrapped publisher.
func (p *publisher) Publish(topic string, msgs ...*message.Message) error {
	out := make([]*message.Message, len(msgs))
	for i, msg := range msgs {
		ce, err := p.convert(msg)
		if err != nil {
			return fmt.Errorf("cloudevents: topic %q: message %d of %d: %w", topic, i, len(msgs), err)
		}
		out[i] = ce
	}
	return p.pub.Publish(topic, out...)
}

// Close closes the wrapped publisher.
func (p *publisher) Close() error { return p.pub.Close() }

// errorClassifier is forwarder.ErrorClassifier, repeated here so that brokers do not import the
// forwarder.
type errorClassifier interface {
	Retriable(err error) bool
}

// Retriable classifies the errors of the decorator's calls (forwarder.ErrorClassifier):
// ErrNotAnEvent is permanent, ErrEarlierMessageInvalid retriable, and any other error is
// classified by the wrapped publisher's Retriable, or retriable when it has none.
func (p *publisher) Retriable(err error) bool {
	switch {
	case errors.Is(err, ErrEarlierMessageInvalid):
		return true
	case errors.Is(err, ErrNotAnEvent):
		return false
	}
	if c, ok := p.pub.(errorClassifier); ok {
		return c.Retriable(err)
	}
	return err != nil
}

// convert returns a copy of msg with the CloudEvents attributes in its metadata.
func (p *publisher) convert(msg *message.Message) (*message.Message, error) {
	if msg == nil {
		return nil, fmt.Errorf("nil message: %w", ErrNotAnEvent)
	}
	id := msg.Metadata.Get(outbox.MetadataEventID)
	if id == "" {
		id = msg.UUID
	}
	if id == "" {
		return nil, fmt.Errorf("message has neither %s metadata nor a UUID: %w", outbox.MetadataEventID, ErrNotAnEvent)
	}
	eventType := msg.Metadata.Get(outbox.MetadataEventType)
	if eventType == "" {
		return nil, fmt.Errorf("message %s has no %s metadata: %w", msg.UUID, outbox.MetadataEventType, ErrNotAnEvent)
	}
	var at string
	if raw := msg.Metadata.Get(outbox.MetadataCreatedAt); raw != "" {
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return nil, fmt.Errorf("message %s: %s %q is not an RFC 3339 time: %w", msg.UUID, outbox.MetadataCreatedAt, raw, ErrNotAnEvent)
		}
		at = t.UTC().Format(time.RFC3339Nano)
	}

	out := message.NewMessage(msg.UUID, msg.Payload)
	out.Metadata = make(message.Metadata, len(msg.Metadata)+7)
	contentType := ""
	for k, v := range msg.Metadata {
		out.Metadata[k] = v
		if contentType == "" && strings.EqualFold(k, ContentType) {
			contentType = v
		}
	}
	if v, ok := msg.Metadata[ContentType]; ok {
		contentType = v // the exact key wins over another spelling
	}
	if contentType != "" {
		out.Metadata[ContentType] = contentType
	}
	out.Metadata[AttrSpecVersion] = SpecVersion
	out.Metadata[AttrID] = id
	out.Metadata[AttrType] = eventType
	out.Metadata[AttrSource] = p.source
	if subject := msg.Metadata.Get(outbox.MetadataAggregateID); subject != "" {
		out.Metadata[AttrSubject] = subject
	} else {
		delete(out.Metadata, AttrSubject)
	}
	if at != "" {
		out.Metadata[AttrTime] = at
	} else {
		delete(out.Metadata, AttrTime)
	}
	out.SetContext(msg.Context())
	return out, nil
}

// eachPublisher is the decorator for a publisher with per-message outcomes.
type eachPublisher struct {
	*publisher
	each outcomePublisher
}

// PublishEach converts msgs and publishes them through the wrapped publisher's PublishEach. It
// returns len(msgs) errors, as forwarder.OutcomePublisher requires: a message that is not an
// event fails alone with ErrNotAnEvent, the later messages of its key (its aggregate id, the key
// of every outboxkit broker; all later messages after a nil one, whose key is unknown) fail with
// ErrEarlierMessageInvalid without being sent, and every other message is sent.
func (p *eachPublisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	errs := make([]error, len(msgs))
	out := make([]*message.Message, 0, len(msgs))
	sent := make([]int, 0, len(msgs))
	refused := map[string]bool{}
	holdAll := false
	for i, msg := range msgs {
		if holdAll || (msg != nil && refused[msg.Metadata.Get(outbox.MetadataAggregateID)]) {
			errs[i] = fmt.Errorf("cloudevents: topic %q: message %s: %w", topic, msg.UUID, ErrEarlierMessageInvalid)
			continue
		}
		ce, err := p.convert(msg)
		if err != nil {
			errs[i] = fmt.Errorf("cloudevents: topic %q: %w", topic, err)
			if msg == nil {
				holdAll = true
			} else {
				refused[msg.Metadata.Get(outbox.MetadataAggregateID)] = true
			}
			continue
		}
		out, sent = append(out, ce), append(sent, i)
	}
	if len(out) == 0 {
		return errs
	}
	results := p.each.PublishEach(ctx, topic, out)
	for j, i := range sent {
		if len(results) != len(out) {
			errs[i] = fmt.Errorf("cloudevents: the wrapped publisher returned %d outcomes for %d messages", len(results), len(out))
			continue
		}
		errs[i] = results[j]
	}
	return errs
}

// connectPublisher is the decorator for a publisher with Connect.
type connectPublisher struct {
	*publisher
	conn connector
}

// Connect calls the wrapped publisher's Connect.
func (p *connectPublisher) Connect(topic string) error { return p.conn.Connect(topic) }

// eachConnectPublisher is the decorator for a publisher with PublishEach and Connect.
type eachConnectPublisher struct {
	eachPublisher
	conn connector
}

// Connect calls the wrapped publisher's Connect.
func (p *eachConnectPublisher) Connect(topic string) error { return p.conn.Connect(topic) }

// transactionalPublisher is forwarder.TransactionalPublisher's own methods, repeated here so that
// brokers do not import the forwarder.
type transactionalPublisher interface {
	OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error)
	CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error)
	CloseUnit(unit string)
}

// eachTransactionalPublisher is the decorator for a publisher with PublishEach and transactions
// (brokers/kafka): exactly-once delivery publishes CloudEvents too.
type eachTransactionalPublisher struct {
	eachPublisher
	tx transactionalPublisher
}

// OpenUnit calls the wrapped publisher's OpenUnit.
func (p *eachTransactionalPublisher) OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error) {
	return p.tx.OpenUnit(ctx, unit, checkpointTopic, slot)
}

// CommitUnit converts msgs and commits them with the checkpoint (which is not an event and is
// left as it is) through the wrapped publisher. A message that is not an event fails alone with
// ErrNotAnEvent, and nothing is committed (the forwarder then dead-letters it and sends the
// others again).
func (p *eachTransactionalPublisher) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message,
	checkpoint []byte) ([]error, error) {
	out := make([]*message.Message, len(msgs))
	for i, msg := range msgs {
		ce, err := p.convert(msg)
		if err != nil {
			errs := make([]error, len(msgs))
			errs[i] = fmt.Errorf("cloudevents: topic %q: %w", topics[i], err)
			return errs, fmt.Errorf("cloudevents: transaction of unit %s not sent: %w", unit, errs[i])
		}
		out[i] = ce
	}
	return p.tx.CommitUnit(ctx, unit, topics, out, checkpoint)
}

// CloseUnit calls the wrapped publisher's CloseUnit.
func (p *eachTransactionalPublisher) CloseUnit(unit string) { p.tx.CloseUnit(unit) }
