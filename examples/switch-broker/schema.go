package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/schema"
)

// changeSchema is the Avro schema of the example's events (a change), registered for the topic's
// subject when the configuration has a schema_registry section.
const changeSchema = `{"type":"record","name":"Change","namespace":"example.accounts","fields":[
 {"name":"account","type":"string"},{"name":"seq","type":"long"},{"name":"amount","type":"long"}]}`

// decodeFunc turns a consumed payload back into the event's JSON.
type decodeFunc func(ctx context.Context, payload []byte) ([]byte, error)

// setUpSchema registers changeSchema for topic's subject in the configured registry (a team does
// this in its deployment; the relay only reads schemas) and returns how the consumer reads the
// events back. The relay encodes with the same schema on every broker; what the broker carries
// differs: Kafka's records are in the Confluent wire format (the schema id in a header), read
// with brokers/schema's Decoder, while Pulsar keeps the schema in its own registry and carries
// bare Avro, read with the schema (as any typed Pulsar consumer does). Without a schema_registry
// section the payload is the writer's JSON.
func setUpSchema(ctx context.Context, out io.Writer, cfg brokerconfig.Config, topic string) (decodeFunc, error) {
	if !cfg.SchemaRegistry.On() {
		return func(_ context.Context, payload []byte) ([]byte, error) { return payload, nil }, nil
	}
	client, err := sr.NewClient(sr.URLs(cfg.SchemaRegistry.URL))
	if err != nil {
		return nil, fmt.Errorf("schema registry client: %w", err)
	}
	registered, err := client.CreateSchema(ctx, schema.Subject(topic), sr.Schema{Type: sr.TypeAvro, Schema: changeSchema})
	if err != nil {
		return nil, fmt.Errorf("register the schema of %s: %w", schema.Subject(topic), err)
	}
	fmt.Fprintf(out, "schema: Avro, subject %s, id %d in %s\n", registered.Subject, registered.ID, cfg.SchemaRegistry.URL)
	readers := map[string]func() (decodeFunc, error){
		brokerconfig.BrokerPulsar: bareAvro,
	}
	if reader, ok := readers[cfg.Broker]; ok {
		return reader()
	}
	dec, err := schema.NewDecoder(client)
	if err != nil {
		return nil, fmt.Errorf("schema decoder: %w", err)
	}
	return dec.Decode, nil
}

// bareAvro reads a bare Avro body of changeSchema (Pulsar's payload) as JSON.
func bareAvro() (decodeFunc, error) {
	parsed, err := avro.Parse(changeSchema)
	if err != nil {
		return nil, fmt.Errorf("parse the change schema: %w", err)
	}
	return func(_ context.Context, payload []byte) ([]byte, error) {
		var c change
		if err := avro.Unmarshal(parsed, payload, &c); err != nil {
			return nil, fmt.Errorf("not Avro of the change schema: %w", err)
		}
		return json.Marshal(c)
	}, nil
}
