package nats

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishEach sends msgs, in the given order, to topic and reports the outcome of each: errs[i]
// is nil when JetStream acknowledged msgs[i] (stored it, or dropped it as a duplicate of a
// message it stored within the duplicate window). It returns exactly len(msgs) errors, once
// every message is acknowledged or failed, at the latest when ctx is done or the publisher is
// closed. It is forwarder.OutcomePublisher; see docs/nats.md.
//
// Why it is written on nats.go's asynchronous publish and not on watermill-nats: the relay needs
// each message's own outcome, and a JetStream acknowledgement (PubAckFuture) is exactly that.
//
// How per-key order and gapless failures are obtained: messages are sent in waves; wave k holds
// the k-th message of every key (the key is the metadata entry Config.KeyMetadata; messages
// without one share the key ""), all published asynchronously, and wave k+1 starts only when
// every acknowledgement of wave k arrived. A key never has two messages in flight, because
// JetStream can fail a message and store the next one of the same connection: a "no responders"
// answer while a stream is starting or moving, an acknowledgement lost with a reconnection
// (nats.go fails the pending acknowledgements with ErrDisconnected, while the messages still
// buffered are sent after reconnecting), a clustered stream changing leader. Neither JetStream's
// expected-sequence headers (they need the earlier message's sequence, unknown before its
// acknowledgement) nor its deduplication can undo such a reordering. So once a message fails,
// the later messages of its key are not sent (ErrEarlierMessageFailed), and a permanent error
// (a message larger than the server's max_payload or the stream's max_msg_size, an invalid
// header) is the message's own. The cost: a hot key gets one round trip per message, while any
// number of distinct keys share each round trip (docs/nats.md has the figures).
//
// A failed message may still have been stored (an acknowledgement timed out or was lost): the
// relay sends it again with the same Nats-Msg-Id, which JetStream drops within the stream's
// duplicate window, so the stream holds it once and in order.
func (p *Publisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	errs := make([]error, len(msgs))
	if ctx == nil {
		ctx = context.Background()
	}
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		fill(errs, fmt.Errorf("nats: publish to %s: %w", topic, ErrPublisherClosed))
		return errs
	}
	if len(msgs) == 0 {
		return errs
	}
	if err := checkTopic(topic); err != nil {
		fill(errs, err)
		return errs
	}
	stream, err := p.streams.ensure(ctx, topic)
	if err != nil {
		fill(errs, err)
		return errs
	}
	call := &publishCall{p: p, ctx: ctx, topic: topic, stream: stream, msgs: msgs, errs: errs,
		acked: make([]bool, len(msgs)), failed: map[string]bool{}}
	for _, wave := range waves(msgs, p.config.KeyMetadata) {
		if !call.send(wave) {
			break
		}
	}
	return errs
}

// waves splits the indexes of msgs into waves: wave k holds the k-th message of every key, in
// the order of msgs.
func waves(msgs []*message.Message, keyMetadata string) [][]int {
	var out [][]int
	position := map[string]int{}
	for i, msg := range msgs {
		key := ""
		if msg != nil {
			key = msg.Metadata.Get(keyMetadata)
		}
		k := position[key]
		position[key]++
		if k == len(out) {
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	return out
}

// publishCall is the state of one PublishEach call.
type publishCall struct {
	p      *Publisher
	ctx    context.Context
	topic  string
	stream string
	msgs   []*message.Message
	errs   []error
	acked  []bool
	failed map[string]bool // keys with a failure
}

// inFlight is a message sent and awaiting its acknowledgement.
type inFlight struct {
	i      int
	future jetstream.PubAckFuture
}

// send publishes the messages of one wave whose key has no failure and waits for their
// acknowledgements. It reports false when the call was stopped (ctx done, publisher closing):
// every message without an outcome then has one.
func (c *publishCall) send(wave []int) bool {
	pending := make([]inFlight, 0, len(wave))
	for _, i := range wave {
		if c.stopped() != nil {
			break // await fails the rest
		}
		key := c.key(i)
		if c.failed[key] {
			c.errs[i] = fmt.Errorf("nats: publish message %s to %s: %w", c.msgs[i].UUID, c.topic, ErrEarlierMessageFailed)
			continue
		}
		future, err := c.publish(i)
		if err != nil {
			c.fail(i, err)
			continue
		}
		pending = append(pending, inFlight{i, future})
	}
	return c.await(pending)
}

// publish hands msgs[i] to nats.go.
func (c *publishCall) publish(i int) (jetstream.PubAckFuture, error) {
	msg := c.msgs[i]
	if msg == nil {
		return nil, fmt.Errorf("nats: publish to %s: message %d of %d is nil: %w", c.topic, i, len(c.msgs), ErrInvalidMessage)
	}
	m, err := toNATS(c.p.config.Subject(c.topic, c.key(i)), msg)
	if err != nil {
		return nil, err
	}
	future, err := c.p.js.PublishMsgAsync(m, jetstream.WithMsgID(msg.UUID), jetstream.WithExpectStream(c.stream))
	if err != nil {
		return nil, fmt.Errorf("nats: publish message %s to %s: %w", msg.UUID, m.Subject, err)
	}
	return future, nil
}

// await waits for the acknowledgement of every message in pending. It reports false when the
// call was stopped (ctx done, publisher closing): every message without an outcome, sent or
// not, then fails with the reason.
func (c *publishCall) await(pending []inFlight) bool {
	for _, f := range pending {
		select {
		case <-f.future.Ok():
			c.acked[f.i] = true
		case err := <-f.future.Err():
			c.fail(f.i, fmt.Errorf("nats: publish message %s to %s: %w", c.msgs[f.i].UUID, f.future.Msg().Subject, err))
		case <-c.ctx.Done():
			c.acked[f.i] = acked(f.future)
		case <-c.p.closing:
			c.acked[f.i] = acked(f.future)
		}
	}
	err := c.stopped()
	if err == nil {
		return true
	}
	for i := range c.msgs {
		if c.errs[i] == nil && !c.acked[i] {
			c.errs[i] = fmt.Errorf("nats: publish message %s to %s: no acknowledgement: %w", uuidOf(c.msgs[i]), c.topic, err)
		}
	}
	return false
}

// acked reports whether the acknowledgement of f has arrived, without waiting.
func acked(f jetstream.PubAckFuture) bool {
	select {
	case <-f.Ok():
		return true
	default:
		return false
	}
}

// stopped returns why the call must stop, or nil.
func (c *publishCall) stopped() error {
	select {
	case <-c.p.closing:
		return ErrPublisherClosed
	default:
	}
	return c.ctx.Err()
}

func (c *publishCall) key(i int) string {
	if c.msgs[i] == nil {
		return ""
	}
	return c.msgs[i].Metadata.Get(c.p.config.KeyMetadata)
}

// fail records the failure of msgs[i]: the later messages of its key are not sent.
func (c *publishCall) fail(i int, err error) {
	c.errs[i] = err
	c.failed[c.key(i)] = true
}

func uuidOf(msg *message.Message) string {
	if msg == nil {
		return ""
	}
	return msg.UUID
}

// fill sets every entry of errs to err.
func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}
