package nats

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxkit/outboxkit/brokers/internal/publishcall"
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
		publishcall.Fill(errs, fmt.Errorf("nats: publish to %s: %w", topic, ErrPublisherClosed))
		return errs
	}
	if len(msgs) == 0 {
		return errs
	}
	if err := checkTopic(topic); err != nil {
		publishcall.Fill(errs, err)
		return errs
	}
	stream, err := p.streams.ensure(ctx, topic)
	if err != nil {
		publishcall.Fill(errs, err)
		return errs
	}
	call := &publishCall{Call: publishcall.New(msgs, errs, p.config.KeyMetadata), p: p, ctx: ctx, topic: topic, stream: stream}
	call.Waves(call.send, call.heldBack)
	return errs
}

// publishCall is the state of one PublishEach call.
type publishCall struct {
	*publishcall.Call // per-message outcomes, per-key failures, the waves
	p                 *Publisher
	ctx               context.Context
	topic             string
	stream            string
}

// inFlight is a message sent and awaiting its acknowledgement.
type inFlight struct {
	i      int
	future jetstream.PubAckFuture
}

// send publishes the messages of one wave (none of a key with a failure) and waits for their
// acknowledgements. It reports false when the call was stopped (ctx done, publisher closing):
// every message without an outcome then has one.
func (c *publishCall) send(wave []int) bool {
	pending := make([]inFlight, 0, len(wave))
	for _, i := range wave {
		if c.stopped() != nil {
			break // await fails the rest
		}
		future, err := c.publish(i)
		if err != nil {
			c.Fail(i, err)
			continue
		}
		pending = append(pending, inFlight{i, future})
	}
	return c.await(pending)
}

// heldBack fails msgs[i], unsent: an earlier message of its key failed.
func (c *publishCall) heldBack(i int) {
	c.Errs[i] = fmt.Errorf("nats: publish message %s to %s: %w", publishcall.UUIDOf(c.Msgs[i]), c.topic, ErrEarlierMessageFailed)
}

// publish hands msgs[i] to nats.go.
func (c *publishCall) publish(i int) (jetstream.PubAckFuture, error) {
	msg := c.Msgs[i]
	if msg == nil {
		return nil, fmt.Errorf("nats: publish to %s: message %d of %d is nil: %w", c.topic, i, len(c.Msgs), ErrInvalidMessage)
	}
	m, err := toNATS(c.p.config.Subject(c.topic, c.Key(i)), msg)
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
			c.Acked[f.i] = true
		case err := <-f.future.Err():
			c.Fail(f.i, fmt.Errorf("nats: publish message %s to %s: %w", c.Msgs[f.i].UUID, f.future.Msg().Subject, err))
		case <-c.ctx.Done():
			c.Acked[f.i] = acked(f.future)
		case <-c.p.closing:
			c.Acked[f.i] = acked(f.future)
		}
	}
	err := c.stopped()
	if err == nil {
		return true
	}
	for i := range c.Msgs {
		if c.Errs[i] == nil && !c.Acked[i] {
			c.Errs[i] = fmt.Errorf("nats: publish message %s to %s: no acknowledgement: %w", publishcall.UUIDOf(c.Msgs[i]), c.topic, err)
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
