package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// DecodeError reports a payload that cannot be read back: not in the Confluent wire format, or a
// body that does not decode with the schema its id names. Reading it again cannot succeed, so it
// is permanent (Retriable reports false).
type DecodeError struct {
	// ID is the schema id of the payload's header; 0 when there is no header.
	ID     int
	Reason string
}

func (e *DecodeError) Error() string {
	if e.ID == 0 {
		return "schema: cannot decode the payload: " + e.Reason
	}
	return fmt.Sprintf("schema: cannot decode the payload with schema %d: %s", e.ID, e.Reason)
}

// Decoder turns payloads in the Confluent wire format back into JSON, the consumer side of
// Encoder: the schema is the one the payload's id names (Avro, Protobuf or JSON Schema), fetched
// from the registry once per id. It reads what any Confluent serializer wrote, not only the
// relay. A Decoder is safe for concurrent use.
type Decoder struct {
	client *sr.Client
	// cache holds the schemas looked up by id, least recently used dropped first.
	cache *lru.Cache[int, codec]
}

// DecoderOption configures a Decoder.
type DecoderOption func(*decoderOptions)

type decoderOptions struct{ cacheSize int }

// DecoderCacheSize bounds the schemas a Decoder keeps, by id: past it the least recently used
// one is dropped and fetched again when a payload names it. Default: DefaultCacheSize.
func DecoderCacheSize(n int) DecoderOption {
	return func(o *decoderOptions) { o.cacheSize = n }
}

// NewDecoder returns a Decoder that looks schemas up by id with client.
func NewDecoder(client *sr.Client, opts ...DecoderOption) (*Decoder, error) {
	if client == nil {
		return nil, errors.New("schema: nil registry client")
	}
	o := decoderOptions{cacheSize: DefaultCacheSize}
	for _, opt := range opts {
		opt(&o)
	}
	if o.cacheSize <= 0 {
		return nil, fmt.Errorf("schema: decoder cache size %d: want 1 or more", o.cacheSize)
	}
	cache, err := lru.New[int, codec](o.cacheSize)
	if err != nil {
		return nil, fmt.Errorf("schema: decoder cache: %w", err)
	}
	return &Decoder{client: client, cache: cache}, nil
}

// Decode returns the JSON of a Confluent-framed payload: an Avro record as the object the
// encoder reads (a union's value without its branch name, bytes as a string), a Protobuf message
// in protobuf's canonical JSON (protojson: JSON field names, 64-bit integers as strings), a JSON
// Schema payload as it was written. A payload that cannot be read is a *DecodeError; a failed
// lookup a *RegistryError (retriable).
func (d *Decoder) Decode(ctx context.Context, framed []byte) ([]byte, error) {
	var header sr.ConfluentHeader
	id, body, err := header.DecodeID(framed)
	if err != nil {
		return nil, &DecodeError{Reason: "no Confluent wire format header (magic byte 0 and a 4-byte schema id)"}
	}
	c, err := d.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	out, m := c.decode(body)
	if m != nil {
		reason := m.reason
		if m.path != "$" {
			reason = m.path + ": " + reason
		}
		return nil, &DecodeError{ID: id, Reason: reason}
	}
	return out, nil
}

func (d *Decoder) lookup(ctx context.Context, id int) (codec, error) {
	c, ok := d.cache.Get(id)
	if ok {
		return c, nil
	}
	s, err := d.client.SchemaByID(ctx, id)
	if err != nil {
		return nil, &RegistryError{ID: id, Err: err}
	}
	c, err = newCodec(ctx, d.client, sr.SubjectSchema{ID: id, Schema: s})
	if err != nil {
		return nil, &RegistryError{ID: id, Err: err}
	}
	d.cache.Add(id, c)
	return c, nil
}

// Middleware is a Watermill handler middleware (message.HandlerMiddleware) that hands the
// handler a copy of each message (UUID, metadata and context kept) with its payload decoded to
// JSON; a message that cannot be decoded fails the handler with the *DecodeError or
// *RegistryError, and the message itself is left as it was received.
func (d *Decoder) Middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		decoded, err := d.Decode(msg.Context(), msg.Payload)
		if err != nil {
			return nil, fmt.Errorf("schema: message %s: %w", msg.UUID, err)
		}
		out := msg.CopyWithContext()
		out.Payload = decoded
		return h(out)
	}
}
