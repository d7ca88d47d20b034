package faultinject

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/outbox"
)

// The schema variant (Config.Schema): the relays encode every event with the Avro schema
// registered for the run's topic in a real registry, the consumer decodes every message back
// through the registry before the ledger reads it, and the poison events are events whose JSON
// breaks the schema. A schema mismatch is permanent: each poison must be dead-lettered at once,
// with a dead letter whose reason names the field path, and never published.

// SchemaAvro is Config.Schema for Avro payloads.
const SchemaAvro = "avro"

// accountAvro is the Avro schema of the writers' payload (payload, whose padding is left out).
const accountAvro = `{"type":"record","name":"AccountChanged","namespace":"outboxkit.faultinject",` +
	`"fields":[{"name":"key","type":"string"},{"name":"seq","type":"long"}]}`

// validateSchema checks the schema variant's settings.
func (c Config) validateSchema() error {
	switch {
	case c.Schema == "":
		return nil
	case c.Schema != SchemaAvro:
		return fmt.Errorf("faultinject: Schema %q: want %q or empty", c.Schema, SchemaAvro)
	case c.RegistryURL == "":
		return fmt.Errorf("faultinject: Schema %q needs RegistryURL", c.Schema)
	case c.Broker.Kind != Kafka && c.Broker.Kind != KafkaCluster:
		return fmt.Errorf("faultinject: Schema %q with broker %s: the relays encode for Kafka only", c.Schema, c.Broker.Kind)
	case c.delivery() == "exactly_once":
		return fmt.Errorf("faultinject: Schema %q with exactly_once: the schema publisher has no transactions yet", c.Schema)
	}
	return nil
}

// registry is the schema variant's side of a run: the subject it registered, the decoder the
// consumer reads with, and the dead letters read from the dead-letter topic.
type registry struct {
	client  *sr.Client
	decoder *schema.Decoder

	mu      sync.Mutex
	decoded int                 // messages decoded through the registry
	reasons map[string][]string // event id -> the reasons of its dead letters
	paths   map[string]string   // poison event id -> the field path its payload breaks
	poisons int                 // schema-breaking payloads written so far
}

// registerSchema registers the writers' Avro schema under the topic's subject (the relays'
// default subject name strategy) and prepares the consumer's decoder; the subject is deleted at
// the end unless Keep.
func (e *env) registerSchema(ctx context.Context) error {
	if e.cfg.Schema == "" {
		return nil
	}
	client, err := sr.NewClient(sr.URLs(e.cfg.RegistryURL))
	if err != nil {
		return fmt.Errorf("faultinject: registry client: %w", err)
	}
	subject := schema.Subject(e.topic)
	ss, err := client.CreateSchema(ctx, subject, sr.Schema{Schema: accountAvro, Type: sr.TypeAvro})
	if err != nil {
		return fmt.Errorf("faultinject: register the Avro schema under %s at %s: %w", subject, e.cfg.RegistryURL, err)
	}
	e.logf("registered the Avro schema under %s (id %d) at %s", subject, ss.ID, e.cfg.RegistryURL)
	if !e.cfg.Keep {
		e.defer_(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := client.DeleteSubject(ctx, subject, sr.SoftDelete); err == nil {
				_, _ = client.DeleteSubject(ctx, subject, sr.HardDelete)
			}
		})
	}
	dec, err := schema.NewDecoder(client)
	if err != nil {
		return err
	}
	e.reg = &registry{client: client, decoder: dec, reasons: map[string][]string{}, paths: map[string]string{}}
	return nil
}

// decodeValue returns the JSON of a message's value: decoded with the schema its header names
// in the schema variant, as it is otherwise.
func (r *registry) decodeValue(ctx context.Context, value []byte) ([]byte, error) {
	if r == nil {
		return value, nil
	}
	out, err := r.decoder.Decode(ctx, value)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.decoded++
	r.mu.Unlock()
	return out, nil
}

// poisonPayload returns the JSON of a schema-breaking event of key k and its field path: every
// other one has seq as a string (a wrong type), the others lack the required key.
func (r *registry) poisonPayload(k string, seq int64) (any, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.poisons++
	if r.poisons%2 == 1 {
		return map[string]any{"key": k, "seq": strconv.FormatInt(seq, 10)}, "$.seq"
	}
	return map[string]any{"seq": seq}, "$.key"
}

// expect records the field path the poison event id breaks.
func (r *registry) expect(id, path string) {
	r.mu.Lock()
	r.paths[id] = path
	r.mu.Unlock()
}

// deadLetterRead reports whether a dead letter of event id was read (always true outside the
// schema variant, which does not read the dead-letter topic).
func (r *registry) deadLetterRead(id string) bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reasons[id]) > 0
}

// consumeDeadLetters reads the dead-letter topic from its start until ctx is cancelled and
// keeps each dead letter's reason header by its event id.
func (r *registry) consumeDeadLetters(ctx context.Context, addrs []string, topic string) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return fmt.Errorf("faultinject: dead-letter consumer: %w", err)
	}
	defer client.Close()
	for ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			var id, reason string
			for _, h := range rec.Headers {
				switch h.Key {
				case outbox.MetadataEventID:
					id = string(h.Value)
				case wmmiddleware.ReasonForPoisonedKey:
					reason = string(h.Value)
				}
			}
			r.mu.Lock()
			r.reasons[id] = append(r.reasons[id], reason)
			r.mu.Unlock()
		})
	}
	return nil
}

// checkDeadLetter counts the dead poison event id in res: with a dead letter whose every copy
// names its field path (PoisonDeadLetters), or not (PoisonPathMissing).
func (e *env) checkDeadLetter(res *Result, id string) {
	r := e.reg
	r.mu.Lock()
	reasons, path := r.reasons[id], r.paths[id]
	r.mu.Unlock()
	if len(reasons) == 0 {
		res.PoisonPathMissing++
		e.sample(res, "poison %s: no dead letter in %s", id, e.topic+"-dlq")
		return
	}
	for _, reason := range reasons {
		if path == "" || !strings.Contains(reason, " at "+path+": ") {
			res.PoisonPathMissing++
			e.sample(res, "poison %s: dead letter reason %q does not name the field path %q", id, reason, path)
			return
		}
	}
	res.PoisonDeadLetters++
	e.logf("dead letter of poison %s (%s): %s", id, path, reasons[0])
}

// countDecoded fills Result.Decoded.
func (e *env) countDecoded(res *Result) {
	if e.reg == nil {
		return
	}
	e.reg.mu.Lock()
	res.Decoded = e.reg.decoded
	e.reg.mu.Unlock()
}
