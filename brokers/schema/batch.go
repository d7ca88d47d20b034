package schema

import (
	"context"
	"maps"

	"github.com/ThreeDotsLabs/watermill/message"
)

// batchSchemas are the schemas of one call's events to one topic, by event type: each event
// type's subject is named once, and each subject looked up once, per call (lookupAll), so that
// encoding an event takes neither the Encoder's lock nor its cache.
type batchSchemas map[string]eventSchema

// eventSchema is how the events of one event type are encoded: with s, the schema of their
// subject t, or not at all (err: the strategy names no subject, or the lookup failed).
type eventSchema struct {
	t   target
	s   cached
	err error
}

// lookupAll looks up the subject of every message to encode, once per subject, so that a
// registry that does not answer fails the whole call before anything is sent (the returned
// error). A lookup that failed otherwise (the registry answers without the subject or version,
// a schema it cannot use, a subject's lasting server error), and an event type the strategy
// names no subject for, are kept in the batch's entry of that event type: those events fail
// alone when encoded.
func (p *publisher) lookupAll(ctx context.Context, topic string, msgs []*message.Message) (batchSchemas, error) {
	batch := batchSchemas{}
	bySubject := map[target]eventSchema{}
	for _, msg := range msgs {
		if msg == nil || !needsEncoding(msg) {
			continue
		}
		eventType := msg.Metadata.Get(eventTypeKey)
		if _, ok := batch[eventType]; ok {
			continue
		}
		t, err := p.enc.target(topic, eventType)
		if err != nil {
			batch[eventType] = eventSchema{err: err}
			continue
		}
		es, ok := bySubject[t]
		if !ok {
			if es, err = p.lookupOnce(ctx, t); err != nil {
				return nil, err
			}
			bySubject[t] = es
		}
		batch[eventType] = es
	}
	return batch, nil
}

// lookupOnce looks up t for lookupAll: an error when the registry does not answer, else t's
// schema or its failure.
func (p *publisher) lookupOnce(ctx context.Context, t target) (eventSchema, error) {
	s, err := p.enc.lookup(ctx, t)
	if err != nil {
		err = p.serverErrors.classify(ctx, err)
		if p.Unavailable(err) {
			return eventSchema{}, err
		}
		return eventSchema{t: t, err: err}, nil
	}
	p.serverErrors.ok(t.subject)
	return eventSchema{t: t, s: s}, nil
}

// schemaFor returns the subject and schema of an event of eventType: the batch's when it has
// the event type (a failed lookup there is returned without asking the registry again), else
// looked up now (Publish, which looks nothing up beforehand).
func (p *publisher) schemaFor(ctx context.Context, batch batchSchemas, topic, eventType string) (target, cached, error) {
	if es, ok := batch[eventType]; ok {
		return es.t, es.s, es.err
	}
	return p.enc.schemaOf(ctx, topic, eventType)
}

// withPayload returns the message of msg's UUID, metadata and context that is sent with payload
// (its encoding). It shares msg's metadata map, which the brokers' publishers only read, rather
// than copying it for every event; ownMetadata copies it, for a caller that sets attributes on
// it. msg itself is left as it is, so a caller can publish it again.
func withPayload(msg *message.Message, payload []byte, ownMetadata bool) *message.Message {
	out := &message.Message{UUID: msg.UUID, Metadata: msg.Metadata, Payload: payload}
	if ownMetadata || out.Metadata == nil {
		out.Metadata = maps.Clone(msg.Metadata)
		if out.Metadata == nil {
			out.Metadata = message.Metadata{}
		}
	}
	out.SetContext(msg.Context())
	return out
}
