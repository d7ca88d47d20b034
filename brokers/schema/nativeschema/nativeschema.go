// Package nativeschema names a schema as a broker with a schema registry of its own (Pulsar's,
// built into the broker) takes it, without naming the broker: brokers/schema hands such schemas
// to a publisher, and the broker's package (brokers/pulsar) turns them into its client's type, so
// that code publishing to Kafka only does not link the Pulsar client.
package nativeschema

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Type is a schema's format, spelled as the registries spell it.
type Type string

// Avro is the only type sent to a broker's own registry today.
const Avro Type = "AVRO"

// Schema is one registered schema: its format and its self-contained definition (for Avro, the
// JSON of the schema). ID is the schema id in the registry it came from, which identifies the
// definition (a publisher may cache its client's schema by it); 0 when it came from none.
type Schema struct {
	Type       Type
	Definition string
	ID         int
}

// String names the schema by its type and id, without its definition (which may be long).
func (s *Schema) String() string {
	if s == nil {
		return "bytes"
	}
	return fmt.Sprintf("%s schema %d", s.Type, s.ID)
}

// Publisher is the capability of a publisher whose broker has a schema registry of its own
// (brokers/pulsar's Publisher). brokers/schema's decorator detects it: it then publishes each
// event's bare body (no Confluent header) with the schema of its subject, which the broker
// records with the topic, so that a consumer with a typed schema reads the events.
type Publisher interface {
	// PublishEachWithSchema is PublishEach (per-message outcomes) where msgs[i] is sent as a
	// message of schemas[i] (nil: as bytes); len(schemas) is len(msgs).
	PublishEachWithSchema(ctx context.Context, topic string, msgs []*message.Message, schemas []*Schema) []error
}
