package schema

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// The optional capabilities of the wrapped publisher that the decorator keeps: the forwarder
// (and the relay command) find them by type assertion, so a decorator that hid them would turn
// exactly-once delivery off or skip the relay's start-up check of the broker.

// connector is the optional Connect method of a broker publisher (brokers/pulsar, nats,
// rabbitmq), which the relay calls at start to find an unreachable broker early.
type connector interface {
	Connect(topic string) error
}

// transactional is forwarder.TransactionalPublisher's own methods, repeated so that brokers do
// not import the forwarder.
type transactional interface {
	OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error)
	CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error)
	CloseUnit(unit string)
}

// withCapabilities returns p with the Connect and the transactions of the publisher it wraps,
// when it has them.
func withCapabilities(p *publisher) message.Publisher {
	conn, hasConnect := p.pub.(connector)
	tx, hasTx := p.pub.(transactional)
	switch {
	case hasConnect && hasTx:
		return &connectTxPublisher{txPublisher{p, tx}, conn}
	case hasTx:
		return &txPublisher{p, tx}
	case hasConnect:
		return &connectPublisher{p, conn}
	}
	return p
}

// connectPublisher is the decorator of a publisher with Connect.
type connectPublisher struct {
	*publisher
	conn connector
}

// Connect calls the wrapped publisher's Connect.
func (p *connectPublisher) Connect(topic string) error { return p.conn.Connect(topic) }

// txPublisher is the decorator of a publisher with exactly-once transactions (brokers/kafka).
type txPublisher struct {
	*publisher
	tx transactional
}

// OpenUnit calls the wrapped publisher's OpenUnit.
func (p *txPublisher) OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error) {
	return p.tx.OpenUnit(ctx, unit, checkpointTopic, slot)
}

// CloseUnit calls the wrapped publisher's CloseUnit.
func (p *txPublisher) CloseUnit(unit string) { p.tx.CloseUnit(unit) }

// CommitUnit encodes msgs (each with the subject its topic, topics[i], names; dead letters and
// events their writers encoded as in PublishEach) and commits them with the checkpoint, which
// is the relay's bookkeeping and left as it is, through the wrapped publisher. When a message
// cannot be encoded, nothing is sent: that message fails with its error (a *MismatchError, or
// a *RegistryError when its lookup failed), the others with nil, and the unit's session is
// closed, as after any failed commit (the forwarder dead-letters a mismatch, leaves the events
// of an unavailable registry pending, and commits the rest in its next transaction).
func (p *txPublisher) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message,
	checkpoint []byte) ([]error, error) {
	if len(topics) != len(msgs) {
		return make([]error, len(msgs)), fmt.Errorf("schema: transaction of unit %s: %d topics for %d messages", unit, len(topics), len(msgs))
	}
	out := make([]*message.Message, len(msgs))
	errs := make([]error, len(msgs))
	var failed error
	fail := func(i int, err error) {
		errs[i] = fmt.Errorf("schema: topic %q: message %d: %w", topics[i], i, err)
		if failed == nil {
			failed = errs[i]
		}
	}
	batches, err := p.lookupTopics(ctx, topics, msgs)
	if err != nil {
		// The registry did not answer one lookup: the events to encode wait, the others
		// (dead letters, events their writers encoded) are not blamed.
		for i, msg := range msgs {
			if needsEncoding(msg) {
				fail(i, err)
			}
		}
	}
	for i, msg := range msgs {
		if errs[i] != nil {
			continue
		}
		enc, _, err := p.encode(ctx, batches[topics[i]], topics[i], msg) // no broker-side schema: transactions are Kafka's
		if err != nil {
			fail(i, err)
			continue
		}
		out[i] = enc
	}
	if failed != nil {
		p.tx.CloseUnit(unit)
		return errs, fmt.Errorf("schema: transaction of unit %s not sent: %w", unit, failed)
	}
	return p.tx.CommitUnit(ctx, unit, topics, out, checkpoint)
}

// lookupTopics looks up the subjects of the messages to encode, topic by topic (lookupAll), so
// that a registry that does not answer fails the transaction at its first lookup instead of
// once per message; it returns each topic's schemas by event type.
func (p *publisher) lookupTopics(ctx context.Context, topics []string, msgs []*message.Message) (map[string]batchSchemas, error) {
	byTopic := map[string][]*message.Message{}
	var order []string
	for i, msg := range msgs {
		if _, ok := byTopic[topics[i]]; !ok {
			order = append(order, topics[i])
		}
		byTopic[topics[i]] = append(byTopic[topics[i]], msg)
	}
	batches := make(map[string]batchSchemas, len(order))
	for _, topic := range order {
		batch, err := p.lookupAll(ctx, topic, byTopic[topic])
		if err != nil {
			return nil, err
		}
		batches[topic] = batch
	}
	return batches, nil
}

// connectTxPublisher is the decorator of a publisher with Connect and transactions.
type connectTxPublisher struct {
	txPublisher
	conn connector
}

// Connect calls the wrapped publisher's Connect.
func (p *connectTxPublisher) Connect(topic string) error { return p.conn.Connect(topic) }
