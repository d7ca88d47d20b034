// Package schema encodes outbox events for a schema registry: the relay, not the business
// transaction, turns an event's JSON payload into the format of the schema its subject has in a
// Confluent-compatible registry (Avro, Protobuf or JSON Schema, as the registered schema's type
// says) and frames it in the Confluent wire format (magic byte 0, the schema id as 4 big-endian
// bytes, for Protobuf the message indexes, then the body), which consumers such as
// confluent-kafka's AvroDeserializer, ProtobufDeserializer and JSONDeserializer or Java's
// KafkaAvroDeserializer read.
//
// The registry client and the wire format are franz-go's pkg/sr. Avro is encoded with
// github.com/hamba/avro/v2 (a maintained, pure-Go library that encodes generic map[string]any
// values without code generation); a registered .proto is compiled with
// github.com/bufbuild/protocompile (Go's protobuf module has no .proto parser) and the payload
// read into a dynamicpb message; a JSON Schema is validated with
// github.com/santhosh-tekuri/jsonschema/v6 (every draft from 4 to 2020-12, exact numbers, errors
// with their instance location), the JSON published as it is.
//
// Around a publisher whose broker has a schema registry of its own (the NativePublisher
// capability: brokers/pulsar's), the decorator publishes the bare Avro body instead, with the
// subject's Avro schema, which Pulsar records with the topic for its typed consumers. The schema
// is handed over as a nativeschema.Schema, which names no broker: this package links no broker's
// client.
//
// The subject is named by a Strategy: the topic (<topic>-value, the default), the record (the
// event's event_type metadata) or both (<topic>-<event_type>).
//
// Failures are classified for the relay: a payload that does not fit its schema is permanent
// (a *MismatchError naming the field path and the reason), everything else (the registry down or
// slow, a subject not registered yet, a registered schema the relay cannot use) is retriable
// (Retriable). See docs/schemas.md for what does not exist yet.
package schema
