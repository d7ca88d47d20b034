package schema

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/schema/nativeschema"
)

// NativePublisher is the capability of a publisher whose broker has a schema registry of its
// own (brokers/pulsar's Publisher: Pulsar's, built into the broker). NewPublisher detects it: the
// decorator then publishes each event's bare Avro body (no Confluent header) with the Avro
// schema of its subject, which the broker records with the topic, so that a consumer with a
// typed Avro schema reads the events. The schema still comes from the configured registry, by
// the same subjects and versions as on Kafka: one configuration for both brokers. The schemas
// it is handed (nativeschema.Schema) name no broker, so this package does not link any
// broker's client.
type NativePublisher = nativeschema.Publisher

// nativeSchemas caches the broker-side schema of each registry schema id.
type nativeSchemas struct {
	mu   sync.Mutex
	byID map[int]*nativeschema.Schema
}

// of returns the broker-side schema of s, the schema of subject: Avro only, self-contained
// (without references), since the broker's registry takes one Avro definition per schema.
// Anything else is a *RegistryError: the registry's schema or the configuration is to fix, not
// the event.
func (n *nativeSchemas) of(subject string, s cached) (*nativeschema.Schema, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ns, ok := n.byID[s.id]; ok {
		return ns, nil
	}
	if s.typ != sr.TypeAvro {
		return nil, &RegistryError{Subject: subject, Err: fmt.Errorf(
			"schema %d is of type %s: a broker with its own schema registry (Pulsar) is sent AVRO schemas only", s.id, s.typ)}
	}
	if s.references > 0 {
		return nil, &RegistryError{Subject: subject, Err: fmt.Errorf(
			"schema %d references %d other schemas: a broker with its own schema registry (Pulsar) takes a self-contained Avro schema", s.id, s.references)}
	}
	if n.byID == nil {
		n.byID = map[int]*nativeschema.Schema{}
	}
	ns := &nativeschema.Schema{Type: nativeschema.Avro, Definition: s.text, ID: s.id}
	n.byID[s.id] = ns
	return ns, nil
}

// encodeNative returns the message to send for msg (withPayload) whose payload is the bare Avro
// body of its JSON payload,
// and the broker-side schema to send it with. An event its writer encoded in the Confluent wire
// format is refused permanently: the broker's consumers read bare bodies of the topic's schema.
func (p *publisher) encodeNative(ctx context.Context, batch batchSchemas, topic string, msg *message.Message) (*message.Message, *nativeschema.Schema, error) {
	eventType := msg.Metadata.Get(eventTypeKey)
	if preEncoded(msg) {
		t, _ := p.enc.target(topic, eventType)
		return nil, nil, &MismatchError{Subject: t.subject, Path: "$", Reason: fmt.Sprintf(
			"header %s: %s: the payload is in the Confluent wire format, which a broker with its own schema registry (Pulsar) does not read; write the JSON instead",
			MetadataEncoded, msg.Metadata.Get(MetadataEncoded))}
	}
	t, s, err := p.schemaFor(ctx, batch, topic, eventType)
	if err != nil {
		return nil, nil, err
	}
	ps, err := p.natives.of(t.subject, s)
	if err != nil {
		return nil, nil, err
	}
	_, body, err := encodeWith(t, s, eventType, msg.Payload)
	if err != nil {
		return nil, nil, err
	}
	return withPayload(msg, body, false), ps, nil
}

// errNativeCloudEvents refuses CloudEventsAttributes with a NativePublisher: its attributes name
// the Confluent wire format's schema ids, which the broker's own registry does not use.
var errNativeCloudEvents = errors.New("schema: CloudEventsAttributes is for the Confluent wire format, not a publisher whose broker has its own schema registry")
