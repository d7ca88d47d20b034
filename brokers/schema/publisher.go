package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/outboxkit/outboxkit/brokers/schema/nativeschema"
	"github.com/outboxkit/outboxkit/outbox"
)

// ErrEarlierMessageNotEncoded marks a message of a PublishEach call that was not sent because an
// earlier message of its key could not be encoded (it does not fit the schema, or its lookup
// failed): the message itself may be fine, so it is retriable, and its key's failures stay
// gapless (the forwarder parks the key behind the earlier one).
var ErrEarlierMessageNotEncoded = errors.New("schema: not sent because an earlier message of its key was not encoded")

// outcomePublisher is forwarder.OutcomePublisher, repeated so that brokers do not import the
// forwarder.
type outcomePublisher interface {
	PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
}

// errorClassifier is forwarder.ErrorClassifier, repeated for the same reason.
type errorClassifier interface {
	Retriable(err error) bool
}

// outageClassifier is forwarder.OutageClassifier, repeated for the same reason.
type outageClassifier interface {
	Unavailable(err error) bool
}

// NewPublisher returns a publisher that encodes every message's payload (but a dead letter's,
// see needsEncoding) with enc (JSON to the Confluent wire format, with the schema of the
// subject its topic and event_type metadata name) and publishes it through pub as a new
// message that shares the original's metadata (the original is left as it is); pub needs per-message outcomes (PublishEach: brokers/kafka has it). When pub is a
// NativePublisher (brokers/pulsar's), each event is published instead as its bare Avro body
// with the subject's Avro schema, which the broker's own registry records. Its Retriable
// (forwarder.ErrorClassifier) makes a *MismatchError permanent and ErrEarlierMessageNotEncoded and
// registry failures retriable, and leaves every other error to pub's Retriable; its Unavailable
// (forwarder.OutageClassifier) reports a registry that does not answer (RegistryError.Unavailable),
// so that the forwarder retries such events without counting attempts, and leaves every other
// error to pub's Unavailable. Close closes pub.
//
// The result keeps pub's optional capabilities (see withCapabilities): Connect when pub has it,
// and the transactions of exactly-once delivery (forwarder.TransactionalPublisher) when pub has
// them (brokers/kafka), with every event of a transaction encoded.
func NewPublisher(pub message.Publisher, enc *Encoder, opts ...PublisherOption) (message.Publisher, error) {
	if pub == nil || enc == nil {
		return nil, errors.New("schema: NewPublisher needs a publisher and an encoder")
	}
	each, ok := pub.(outcomePublisher)
	if !ok {
		return nil, fmt.Errorf("schema: publisher %T has no PublishEach (per-message outcomes)", pub)
	}
	p := &publisher{pub: pub, each: each, enc: enc,
		serverErrors: &serverErrors{bound: DefaultServerErrorBound, client: enc.client, now: time.Now}}
	if native, ok := pub.(NativePublisher); ok {
		p.native, p.natives = native, &nativeSchemas{}
	}
	for _, opt := range opts {
		opt(p)
	}
	if p.native != nil && p.cloudEvents != nil {
		return nil, errNativeCloudEvents
	}
	return withCapabilities(p), nil
}

type publisher struct {
	pub  message.Publisher
	each outcomePublisher
	enc  *Encoder
	// native, when pub's broker has its own schema registry, takes the messages with their
	// broker-side schemas, cached in natives.
	native  NativePublisher
	natives *nativeSchemas
	// cloudEvents, when set, adds the CloudEvents attributes of the encoding (content-type,
	// ce_dataschema under this registry URL) to every encoded message.
	cloudEvents *cloudEventsAttributes
	// serverErrors bounds how long a server error of one subject counts as an outage.
	serverErrors *serverErrors
}

// Publish encodes every message before sending any, and sends none when one fails.
func (p *publisher) Publish(topic string, msgs ...*message.Message) error {
	ctx := context.Background()
	out, schemas := make([]*message.Message, len(msgs)), make([]*nativeschema.Schema, len(msgs))
	for i, msg := range msgs {
		enc, ps, err := p.encode(ctx, nil, topic, msg)
		if err != nil {
			return fmt.Errorf("schema: topic %q: message %d of %d: %w", topic, i, len(msgs), err)
		}
		out[i], schemas[i] = enc, ps
	}
	if p.native != nil {
		return errors.Join(p.native.PublishEachWithSchema(ctx, topic, out, schemas)...)
	}
	return p.pub.Publish(topic, out...)
}

// PublishEach returns len(msgs) errors, as forwarder.OutcomePublisher requires: a message that
// does not fit its schema fails alone with a *MismatchError, the later messages of its key (its
// aggregate id; every later message after a nil one) fail with ErrEarlierMessageNotEncoded
// without being sent, a registry failure fails
// every message of the call (retriable), and the others are sent.
func (p *publisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	errs := make([]error, len(msgs))
	if !slices.ContainsFunc(msgs, func(msg *message.Message) bool { return !isDeadLetter(msg) }) {
		return p.each.PublishEach(ctx, topic, msgs)
	}
	batch, err := p.lookupAll(ctx, topic, msgs)
	if err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("schema: topic %q: %w", topic, err)
		}
		return errs
	}
	out := make([]*message.Message, 0, len(msgs))
	schemas := make([]*nativeschema.Schema, 0, len(msgs))
	sent := make([]int, 0, len(msgs))
	refused := map[string]bool{}
	holdAll := false // after a nil message, whose key is unknown
	for i, msg := range msgs {
		var key string
		if msg != nil {
			key = msg.Metadata.Get(outbox.MetadataAggregateID)
		}
		if holdAll || (msg != nil && refused[key]) {
			errs[i] = fmt.Errorf("schema: topic %q: message %d: %w", topic, i, ErrEarlierMessageNotEncoded)
			continue
		}
		enc, ps, err := p.encode(ctx, batch, topic, msg)
		if err != nil {
			errs[i] = fmt.Errorf("schema: topic %q: message %d: %w", topic, i, err)
			if msg == nil {
				holdAll = true
			} else {
				refused[key] = true
			}
			continue
		}
		out, schemas, sent = append(out, enc), append(schemas, ps), append(sent, i)
	}
	if len(out) == 0 {
		return errs
	}
	var results []error
	if p.native != nil {
		results = p.native.PublishEachWithSchema(ctx, topic, out, schemas)
	} else {
		results = p.each.PublishEach(ctx, topic, out)
	}
	for j, i := range sent {
		if len(results) != len(out) {
			errs[i] = fmt.Errorf("schema: the wrapped publisher returned %d outcomes for %d messages", len(results), len(out))
			continue
		}
		errs[i] = results[j]
	}
	return errs
}

// isDeadLetter reports a message with Watermill's poison reason header, as the forwarder
// publishes dead letters: it keeps the event's payload as the writer stored it, so that a poison
// event reaches the dead-letter topic.
func isDeadLetter(msg *message.Message) bool {
	return msg != nil && msg.Metadata.Get(middleware.ReasonForPoisonedKey) != ""
}

// needsEncoding reports whether msg is to be encoded: every message but a dead letter and an
// event its writer encoded (MetadataEncoded).
func needsEncoding(msg *message.Message) bool {
	return msg == nil || !isDeadLetter(msg) && !preEncoded(msg)
}

// encode returns the message to send for msg (UUID, metadata and context kept, see
// withPayload) with its payload encoded, with the schema of its event type in batch (looked up
// now when batch does not have it) and, for a NativePublisher, the broker-side schema to send it
// with (else nil); a dead letter as it is, and an event its writer encoded as it is once its
// framing is checked.
func (p *publisher) encode(ctx context.Context, batch batchSchemas, topic string, msg *message.Message) (*message.Message, *nativeschema.Schema, error) {
	if msg == nil {
		return nil, nil, &MismatchError{Subject: Subject(topic), Path: "$", Reason: "nil message"}
	}
	if isDeadLetter(msg) {
		return msg, nil, nil
	}
	if p.native != nil {
		return p.encodeNative(ctx, batch, topic, msg)
	}
	eventType := msg.Metadata.Get(eventTypeKey)
	if preEncoded(msg) {
		t, _ := p.enc.target(topic, eventType)
		if err := checkPreEncoded(t.subject, msg); err != nil {
			return nil, nil, err
		}
		return msg, nil, nil
	}
	t, s, err := p.schemaFor(ctx, batch, topic, eventType)
	if err != nil {
		return nil, nil, err
	}
	payload, err := frame(t, s, eventType, msg.Payload)
	if err != nil {
		return nil, nil, err
	}
	out := withPayload(msg, payload, p.cloudEvents != nil)
	if p.cloudEvents != nil {
		p.cloudEvents.set(out, s)
	}
	return out, nil, nil
}

// Retriable classifies the decorator's errors (forwarder.ErrorClassifier).
func (p *publisher) Retriable(err error) bool {
	var mismatch *MismatchError
	var registry *RegistryError
	switch {
	case errors.Is(err, ErrEarlierMessageNotEncoded), errors.As(err, &registry):
		return true
	case errors.As(err, &mismatch):
		return false
	}
	if c, ok := p.pub.(errorClassifier); ok {
		return c.Retriable(err)
	}
	return err != nil
}

// Unavailable reports whether err says that the registry did not answer (a *RegistryError whose
// Unavailable is true), or, for any other error, what pub's Unavailable says (false when pub
// has none): forwarder.OutageClassifier.
func (p *publisher) Unavailable(err error) bool {
	var registry *RegistryError
	if errors.As(err, &registry) {
		return registry.Unavailable()
	}
	if c, ok := p.pub.(outageClassifier); ok {
		return c.Unavailable(err)
	}
	return false
}

// Close closes the wrapped publisher.
func (p *publisher) Close() error { return p.pub.Close() }
