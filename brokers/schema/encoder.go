package schema

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Config selects the schema an Encoder uses for a topic.
type Config struct {
	// Version is the subject version to encode with; 0 means the latest, looked up again once
	// LatestTTL has passed.
	Version int
	// LatestTTL is how long the latest version of a subject is cached. Default: 1m.
	LatestTTL time.Duration
}

// Validate reports a configuration that cannot work, naming the bad value.
func (c Config) Validate() error {
	if c.Version < 0 {
		return fmt.Errorf("schema: version %d: want 0 (latest) or a version number from 1", c.Version)
	}
	if c.LatestTTL < 0 {
		return fmt.Errorf("schema: latest TTL %s is negative", c.LatestTTL)
	}
	return nil
}

// Encoder turns JSON payloads into Confluent-framed Avro with the schema of each topic's subject
// (<topic>-value). Lookups are cached per subject. An Encoder is safe for concurrent use.
type Encoder struct {
	client *sr.Client
	config Config
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	id      int
	schema  avro.Schema
	fetched time.Time
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
	return &Encoder{client: client, config: config, now: time.Now, cache: map[string]cached{}}, nil
}

// Subject is the subject of topic's values under the topic naming strategy.
func Subject(topic string) string { return topic + "-value" }

// Encode returns payload (JSON) encoded in Avro with the schema of topic's subject, in the
// Confluent wire format. A payload that does not fit is a *MismatchError; a failed lookup a
// *RegistryError.
func (e *Encoder) Encode(ctx context.Context, topic string, payload []byte) ([]byte, error) {
	subject := Subject(topic)
	s, err := e.lookup(ctx, subject)
	if err != nil {
		return nil, err
	}
	decoded, m := decodeJSON(payload)
	if m == nil {
		decoded, m = toAvro(s.schema, decoded, "$")
	}
	if m != nil {
		return nil, &MismatchError{Subject: subject, Path: m.path, Reason: m.reason}
	}
	body, err := avro.Marshal(s.schema, decoded)
	if err != nil {
		return nil, &MismatchError{Subject: subject, Path: "$", Reason: err.Error()}
	}
	var header sr.ConfluentHeader
	out, err := header.AppendEncode(make([]byte, 0, 5+len(body)), s.id, nil)
	if err != nil {
		return nil, fmt.Errorf("schema: framing for subject %q: %w", subject, err)
	}
	return append(out, body...), nil
}

// lookup returns the cached schema of subject, fetching it when missing (or, for the latest
// version, older than LatestTTL).
func (e *Encoder) lookup(ctx context.Context, subject string) (cached, error) {
	e.mu.Lock()
	c, ok := e.cache[subject]
	e.mu.Unlock()
	if ok && (e.config.Version != 0 || e.now().Sub(c.fetched) < e.config.LatestTTL) {
		return c, nil
	}
	version := e.config.Version
	if version == 0 {
		version = -1 // latest, in pkg/sr
	}
	ss, err := e.client.SchemaByVersion(ctx, subject, version)
	if err != nil {
		return cached{}, &RegistryError{Subject: subject, Err: err}
	}
	if ss.Type != sr.TypeAvro {
		return cached{}, &RegistryError{Subject: subject, Err: fmt.Errorf("schema %d is %s, only Avro is supported", ss.ID, ss.Type)}
	}
	parsed, err := avro.ParseWithCache(ss.Schema.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return cached{}, &RegistryError{Subject: subject, Err: fmt.Errorf("schema %d does not parse as Avro: %w", ss.ID, err)}
	}
	c = cached{id: ss.ID, schema: parsed, fetched: e.now()}
	e.mu.Lock()
	e.cache[subject] = c
	e.mu.Unlock()
	return c, nil
}
