package schema

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// DefaultCacheSize is how many schemas an Encoder (by subject and version) or a Decoder (by id)
// keeps when not told otherwise.
const DefaultCacheSize = 1000

// Config selects the schema an Encoder uses for an event.
type Config struct {
	// Version is the subject version to encode with; 0 means the latest, looked up again once
	// LatestTTL has passed.
	Version int
	// LatestTTL is how long the latest version of a subject is cached. Default: 1m.
	LatestTTL time.Duration
	// Strategy names the subject of an event (Confluent's subject name strategies). Default:
	// StrategyTopic.
	Strategy Strategy
	// Topics overrides Strategy, Version and Register for the topics it names.
	Topics map[string]TopicConfig
	// Register lets the Encoder register a subject's schema from Schemas when the registry has
	// no version of the subject (CreateSchema); off, such a subject is a *RegistryError, as
	// any failed lookup. Default: false.
	Register bool
	// Schemas are the schemas the Encoder may register, by subject (without references).
	Schemas map[string]sr.Schema
	// CacheSize bounds the schemas the Encoder keeps, by subject and version: past it the least
	// recently used one is dropped and looked up again when an event needs it. Default:
	// DefaultCacheSize.
	CacheSize int
}

// Validate reports a configuration that cannot work, naming the bad value.
func (c Config) Validate() error {
	if c.Version < 0 {
		return fmt.Errorf("schema: version %d: want 0 (latest) or a version number from 1", c.Version)
	}
	if c.LatestTTL < 0 {
		return fmt.Errorf("schema: latest TTL %s is negative", c.LatestTTL)
	}
	if c.CacheSize < 0 {
		return fmt.Errorf("schema: cache size %d is negative", c.CacheSize)
	}
	if err := c.Strategy.Validate(); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	for _, topic := range slices.Sorted(maps.Keys(c.Topics)) {
		if err := c.Topics[topic].validate(); err != nil {
			return fmt.Errorf("schema: topic %q: %w", topic, err)
		}
	}
	if err := validateRegistration(c); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}

// Encoder turns JSON payloads into the Confluent wire format with the schema of each event's
// subject: Avro, Protobuf or JSON Schema, as the registry says the subject's schema is. Lookups
// are cached per subject. An Encoder is safe for concurrent use.
type Encoder struct {
	client *sr.Client
	config Config
	now    func() time.Time

	// cache holds the schemas looked up, least recently used dropped first.
	cache *lru.Cache[target, cached]

	mu sync.Mutex
	// targets memoizes target: the subject and version of a topic and event type.
	targets map[eventKind]target
}

// eventKind is what names an event's subject: its topic and its type.
type eventKind struct{ topic, eventType string }

// maxTargets bounds Encoder.targets; past it, targets are computed without being remembered.
const maxTargets = 10_000

// cached is a subject's schema, ready to encode with.
type cached struct {
	id      int
	version int
	typ     sr.SchemaType
	codec   codec
	fetched time.Time
	// text is the registered schema's text and references the number of schemas it references.
	text       string
	references int
}

// codec encodes JSON payloads with one registered schema.
type codec interface {
	// encode returns the message indexes of the wire format's header (Protobuf only) and the
	// body; record is the event's record name (its type), "" when not known.
	encode(payload []byte, record string) (index []int, body []byte, m *mismatch)
	// decode returns the JSON of a body read after the schema id (for Protobuf, starting with the
	// message indexes).
	decode(body []byte) ([]byte, *mismatch)
}

// NewEncoder returns an Encoder that looks schemas up with client.
func NewEncoder(client *sr.Client, config Config) (*Encoder, error) {
	if client == nil {
		return nil, errors.New("schema: nil registry client")
	}
	if err := config.Validate(); err != nil {
		return nil, err
	}
	if config.LatestTTL == 0 {
		config.LatestTTL = time.Minute
	}
	if config.Strategy == "" {
		config.Strategy = StrategyTopic
	}
	if config.CacheSize == 0 {
		config.CacheSize = DefaultCacheSize
	}
	cache, err := lru.New[target, cached](config.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("schema: cache: %w", err)
	}
	return &Encoder{client: client, config: config, now: time.Now, cache: cache, targets: map[eventKind]target{}}, nil
}

// Subject is the subject of topic's values under the topic naming strategy.
func Subject(topic string) string { return topic + "-value" }

// Encode returns payload (JSON) encoded with the schema of topic's subject, in the Confluent
// wire format; the same as EncodeEvent without an event type (the topic strategy).
func (e *Encoder) Encode(ctx context.Context, topic string, payload []byte) ([]byte, error) {
	return e.EncodeEvent(ctx, topic, "", payload)
}

// EncodeEvent returns payload (JSON) encoded with the schema of the event's subject, named by the
// configured strategy from topic and eventType (the record name: an Avro record's or a Protobuf
// message's full name, or a JSON Schema's title), in the Confluent wire format. A payload that
// does not fit, or an event the strategy cannot name a subject for, is a *MismatchError; a failed
// lookup a *RegistryError.
func (e *Encoder) EncodeEvent(ctx context.Context, topic, eventType string, payload []byte) ([]byte, error) {
	out, _, err := e.encodeEvent(ctx, topic, eventType, payload)
	return out, err
}

// encodeEvent is EncodeEvent, also returning the schema it encoded with.
func (e *Encoder) encodeEvent(ctx context.Context, topic, eventType string, payload []byte) ([]byte, cached, error) {
	t, s, err := e.schemaOf(ctx, topic, eventType)
	if err != nil {
		return nil, cached{}, err
	}
	out, err := frame(t, s, eventType, payload)
	if err != nil {
		return nil, cached{}, err
	}
	return out, s, nil
}

// frame returns payload (JSON) encoded with s, the schema of t, in the Confluent wire format; a
// payload that does not fit is a *MismatchError.
func frame(t target, s cached, eventType string, payload []byte) ([]byte, error) {
	if f, ok := s.codec.(framer); ok {
		if out, ok := f.appendFramed(s.id, payload, eventType); ok {
			return out, nil
		}
	}
	index, body, err := encodeWith(t, s, eventType, payload)
	if err != nil {
		return nil, err
	}
	var header sr.ConfluentHeader
	out, err := header.AppendEncode(make([]byte, 0, 6+len(index)+len(body)), s.id, index)
	if err != nil {
		return nil, fmt.Errorf("schema: framing for subject %q: %w", t.subject, err)
	}
	return append(out, body...), nil
}

// schemaOf returns the subject and version of an event and its schema.
func (e *Encoder) schemaOf(ctx context.Context, topic, eventType string) (target, cached, error) {
	t, err := e.target(topic, eventType)
	if err != nil {
		return target{}, cached{}, err
	}
	s, err := e.lookup(ctx, t)
	if err != nil {
		return target{}, cached{}, err
	}
	return t, s, nil
}

// encodeWith encodes payload with s, the schema of t: the message indexes of the wire format's
// header (Protobuf only) and the body; a payload that does not fit is a *MismatchError.
func encodeWith(t target, s cached, eventType string, payload []byte) ([]int, []byte, error) {
	index, body, m := s.codec.encode(payload, eventType)
	if m != nil {
		return nil, nil, &MismatchError{Subject: t.subject, Version: s.version, ID: s.id, Path: m.path, Reason: m.reason}
	}
	return index, body, nil
}

// target is a subject and the version to encode with (0: the latest), and whether the Encoder
// may register the subject's configured schema.
type target struct {
	subject  string
	version  int
	register bool
}

// framer is a codec that can write a payload's encoding straight after the wire format's header,
// in one buffer; false leaves the payload to encode (a mismatch, or what only encode takes).
type framer interface {
	appendFramed(id int, payload []byte, record string) ([]byte, bool)
}

// target names the subject and version of an event, remembered per topic and event type.
func (e *Encoder) target(topic, eventType string) (target, error) {
	k := eventKind{topic, eventType}
	e.mu.Lock()
	t, ok := e.targets[k]
	e.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := e.targetOf(topic, eventType)
	if err != nil {
		return t, err
	}
	e.mu.Lock()
	if len(e.targets) < maxTargets {
		e.targets[k] = t
	}
	e.mu.Unlock()
	return t, nil
}

// targetOf names the subject and version of an event: its topic's TopicConfig where there is
// one, else the configured strategy and version.
func (e *Encoder) targetOf(topic, eventType string) (target, error) {
	tc, perTopic := e.config.Topics[topic]
	register := e.config.Register
	if perTopic && tc.Register != nil {
		register = *tc.Register
	}
	if perTopic && tc.Subject != "" {
		return target{tc.Subject, tc.Version, register}, nil
	}
	strategy, version := e.config.Strategy, e.config.Version
	if perTopic {
		version = tc.Version
		if tc.Strategy != "" {
			strategy = tc.Strategy
		}
	}
	subject, ok := strategy.subject(topic, eventType)
	if !ok {
		return target{}, &MismatchError{Subject: "(none)", Path: "$",
			Reason: fmt.Sprintf("the event has no %s metadata, which the %s subject name strategy needs", eventTypeKey, strategy)}
	}
	return target{subject, version, register}, nil
}

// lookup returns the cached schema of t, fetching it when missing (or, for the latest version,
// older than LatestTTL).
func (e *Encoder) lookup(ctx context.Context, t target) (cached, error) {
	c, ok := e.cache.Get(t)
	if ok && (t.version != 0 || e.now().Sub(c.fetched) < e.config.LatestTTL) {
		return c, nil
	}
	version := t.version
	if version == 0 {
		version = -1 // latest, in pkg/sr
	}
	ss, err := e.client.SchemaByVersion(ctx, t.subject, version)
	if err != nil && t.register {
		ss, err = e.registerMissing(ctx, t, err)
	}
	if err != nil {
		return cached{}, &RegistryError{Subject: t.subject, Err: err}
	}
	codec, err := newCodec(ctx, e.client, ss)
	if err != nil {
		return cached{}, &RegistryError{Subject: t.subject, Err: err}
	}
	c = cached{id: ss.ID, version: ss.Version, typ: ss.Type, codec: codec, fetched: e.now(), text: ss.Schema.Schema, references: len(ss.References)}
	e.cache.Add(t, c)
	return c, nil
}

// newCodec parses a registered schema by its type, with the schemas it references fetched
// with client.
func newCodec(ctx context.Context, client *sr.Client, ss sr.SubjectSchema) (codec, error) {
	refs, err := fetchReferences(ctx, client, ss.References)
	if err != nil {
		return nil, fmt.Errorf("schema %d: %w", ss.ID, err)
	}
	c, err := compile(ctx, ss.Type, ss.Schema.Schema, refs)
	if err != nil {
		return nil, fmt.Errorf("schema %d %w", ss.ID, err)
	}
	return c, nil
}

// compile parses a schema's text of type typ, with the schemas it references; the error
// completes "schema ...".
func compile(ctx context.Context, typ sr.SchemaType, text string, refs []reference) (codec, error) {
	var c codec
	var err error
	switch typ {
	case sr.TypeAvro:
		c, err = newAvroCodec(text, refs)
	case sr.TypeProtobuf:
		c, err = newProtoCodec(ctx, text, refs)
	case sr.TypeJSON:
		c, err = newJSONSchemaCodec(text, refs)
	default:
		return nil, fmt.Errorf("is of type %s, which is not supported", typ)
	}
	if err != nil {
		return nil, fmt.Errorf("does not parse as %s: %w", typ, err)
	}
	return c, nil
}
