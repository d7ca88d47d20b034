// Package schema encodes outbox events for a schema registry: the relay, not the business
// transaction, turns an event's JSON payload into Avro with the schema its topic's subject names
// in a Confluent-compatible registry, and frames it in the Confluent wire format (magic byte 0,
// the schema id as 4 big-endian bytes, the Avro binary body), which consumers such as
// confluent-kafka's AvroDeserializer or Java's KafkaAvroDeserializer read.
//
// The registry client and the wire format are franz-go's pkg/sr; the Avro encoding is
// github.com/hamba/avro/v2: a maintained, pure-Go Avro library that encodes generic
// map[string]any values without code generation and parses named and logical types.
//
// Failures are classified for the relay: a payload that does not fit its schema is permanent
// (a *MismatchError naming the field path and the reason), everything else (the registry down or
// slow, a subject not registered yet) is retriable (Retriable).
//
// What exists: Avro, subject by the topic naming strategy (<topic>-value), schema by a fixed
// version or the latest. See docs/schemas.md for what does not exist yet.
package schema
