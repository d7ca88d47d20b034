package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/outboxkit/outboxkit/brokers/schema/nativeschema"
)

// ErrSchemaRefused marks a message PublishEachWithSchema did not send because its schema was
// refused: the topic's schema registry (Pulsar's own) holds a schema the message's is not
// compatible with under the namespace's compatibility strategy, the namespace does not allow
// producers to register schemas, or the schema is one the Pulsar client cannot use (a type
// other than Avro, a definition it does not parse). The message itself may be fine, and an
// operator fixes the schema or the policy, so it is retriable (Retriable), unlike a message
// refused for its own content.
var ErrSchemaRefused = errors.New("pulsar: the broker refused the message's schema")

// PublishEachWithSchema is PublishEach where msgs[i] is sent as a message of schemas[i]
// (nativeschema.Publisher, the capability brokers/schema's decorator looks for): its payload
// must already be encoded with that schema (for Avro, the bare Avro binary), and the producer
// registers the schema in the topic's schema registry, built into the broker, and stamps each
// message with the schema's version, so that consumers with a typed schema read it. A nil
// schemas[i] sends msgs[i] as bytes, as PublishEach does. Each schema is turned into
// pulsar-client-go's once per definition and registered once per producer (pulsar-client-go
// caches its version); a schema refused (by the broker or the client) fails its message with
// ErrSchemaRefused, and the later messages of its key with ErrEarlierMessageFailed.
// len(schemas) must be len(msgs).
func (p *Publisher) PublishEachWithSchema(ctx context.Context, topic string, msgs []*message.Message, schemas []*nativeschema.Schema) []error {
	if len(schemas) != len(msgs) {
		errs := make([]error, len(msgs))
		fillNil(errs, fmt.Errorf("pulsar: publish to %s: %d schemas for %d messages: %w", topic, len(schemas), len(msgs), apulsar.ErrInvalidMessage))
		return errs
	}
	client := make([]apulsar.Schema, len(msgs)) // not nil: publishEach reads nil as bytes only
	var refused []error
	for i, s := range schemas {
		cs, err := p.schemas.of(s)
		if err != nil {
			if refused == nil {
				refused = make([]error, len(msgs))
			}
			refused[i] = fmt.Errorf("pulsar: publish to %s: %w: %w", topic, ErrSchemaRefused, err)
		}
		client[i] = cs
	}
	return p.publishEach(ctx, topic, msgs, client, refused)
}

// clientSchemas caches pulsar-client-go's schema of each nativeschema.Schema by its type and
// definition.
type clientSchemas struct {
	mu    sync.Mutex
	byDef map[nativeschema.Schema]apulsar.Schema
}

// of returns pulsar-client-go's schema of s (nil for a nil s: bytes).
func (c *clientSchemas) of(s *nativeschema.Schema) (apulsar.Schema, error) {
	if s == nil {
		return nil, nil
	}
	key := nativeschema.Schema{Type: s.Type, Definition: s.Definition}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.byDef[key]; ok {
		return cs, nil
	}
	if s.Type != nativeschema.Avro {
		return nil, fmt.Errorf("%s: type %q: only %s schemas are sent to Pulsar's registry", s, s.Type, nativeschema.Avro)
	}
	cs, err := apulsar.NewAvroSchemaWithValidation(s.Definition, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	if c.byDef == nil {
		c.byDef = map[nativeschema.Schema]apulsar.Schema{}
	}
	c.byDef[key] = cs
	return cs, nil
}

// schemaRefused wraps err in ErrSchemaRefused when it is pulsar-client-go's schema failure of a
// message sent with a schema (registering the schema failed), and returns it unchanged otherwise.
func schemaRefused(s apulsar.Schema, err error) error {
	if s != nil && errors.Is(err, apulsar.ErrSchema) {
		return fmt.Errorf("%w: %w", ErrSchemaRefused, err)
	}
	return err
}

// Publisher has the capability brokers/schema's decorator detects by type assertion: a
// signature that drifted from it would turn Pulsar's own registry off without an error.
var _ nativeschema.Publisher = (*Publisher)(nil)
