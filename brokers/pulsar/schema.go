package pulsar

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// ErrSchemaRefused marks a message PublishEachWithSchema did not send because the broker refused
// its schema: the topic's schema registry (Pulsar's own) holds a schema the message's is not
// compatible with under the namespace's compatibility strategy, or the namespace does not
// allow producers to register schemas. The message itself may be fine, and an operator fixes
// the schema or the policy, so it is retriable (Retriable), unlike a message refused for its
// own content.
var ErrSchemaRefused = errors.New("pulsar: the broker refused the message's schema")

// PublishEachWithSchema is PublishEach where msgs[i] is sent as a message of schemas[i] (for
// example pulsar-client-go's NewAvroSchema): its payload must already be encoded with that
// schema (for Avro, the bare Avro binary), and the producer registers the schema in the topic's
// schema registry, built into the broker, and stamps each message with the schema's version, so
// that consumers with a typed schema read it. A nil schemas[i] sends msgs[i] as bytes, as
// PublishEach does. Each schema is registered once per producer (pulsar-client-go caches its
// version); a schema the broker refuses fails its message with ErrSchemaRefused, and the later
// messages of its key with ErrEarlierMessageFailed. len(schemas) must be len(msgs).
func (p *Publisher) PublishEachWithSchema(ctx context.Context, topic string, msgs []*message.Message, schemas []apulsar.Schema) []error {
	if len(schemas) != len(msgs) {
		errs := make([]error, len(msgs))
		fillNil(errs, fmt.Errorf("pulsar: publish to %s: %d schemas for %d messages: %w", topic, len(schemas), len(msgs), apulsar.ErrInvalidMessage))
		return errs
	}
	if schemas == nil {
		schemas = []apulsar.Schema{} // not nil: publishEach reads nil as bytes only
	}
	return p.publishEach(ctx, topic, msgs, schemas)
}

// schemaRefused wraps err in ErrSchemaRefused when it is pulsar-client-go's schema failure of a
// message sent with a schema (registering the schema failed), and returns it unchanged otherwise.
func schemaRefused(s apulsar.Schema, err error) error {
	if s != nil && errors.Is(err, apulsar.ErrSchema) {
		return fmt.Errorf("%w: %w", ErrSchemaRefused, err)
	}
	return err
}
