package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/internal/publishcall"
)

// PublishEach sends msgs, in the given order, to topic and reports the outcome of each: errs[i]
// is nil when the broker confirmed msgs[i] (basic.ack) without returning it. It returns exactly
// len(msgs) errors, once every message is confirmed or failed, at the latest when ctx is done,
// Config.PublishTimeout passed for a message, or the publisher is closed. It is
// forwarder.OutcomePublisher; see docs/rabbitmq.md.
//
// Why it is written on amqp091-go and not on watermill-amqp: the relay needs each message's own
// outcome, and a publisher confirmation (with the mandatory flag's basic.return) is exactly
// that; watermill-amqp's Publish reports one error per call and cannot see a return.
//
// Per-key order and gapless failures: messages are sent in waves; wave k holds the k-th message
// of every key (the metadata entry Config.KeyMetadata; messages without one share the key ""),
// published on the call's channel, and wave k+1 starts once every message of wave k is
// confirmed. A key never has two messages in flight, because a message can fail while the next
// one of its queue is stored: a basic.nack (a queue at its length limit with overflow
// reject-publish, which accepts again once consumers drained it), a confirmation lost with the
// channel (the broker may have stored the message or not, and the next one was already sent),
// a confirmation timeout. So once a message fails, the later messages of its key are not sent
// (ErrEarlierMessageFailed). The cost: a hot key gets one round trip per message, while any
// number of distinct keys share each round trip (docs/rabbitmq.md has the figures).
//
// A failed message may still have been stored (its confirmation was lost): the relay sends it
// again and the queue then holds it twice, the first copy in order. RabbitMQ has no
// broker-side deduplication; consumers deduplicate by message UUID.
func (p *Publisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	errs := make([]error, len(msgs))
	if ctx == nil {
		ctx = context.Background()
	}
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		publishcall.Fill(errs, fmt.Errorf("rabbitmq: publish to %s: %w", topic, ErrPublisherClosed))
		return errs
	}
	if len(msgs) == 0 {
		return errs
	}
	if err := checkTopic(topic); err != nil {
		publishcall.Fill(errs, err)
		return errs
	}
	if err := p.topology.ensure(ctx, topic); err != nil {
		publishcall.Fill(errs, fmt.Errorf("rabbitmq: publish to %s: %w", topic, err))
		return errs
	}
	cc, err := p.pool.acquire()
	if err != nil {
		publishcall.Fill(errs, fmt.Errorf("rabbitmq: publish to %s: %w", topic, err))
		return errs
	}
	call := &publishCall{Call: publishcall.New(msgs, errs, p.config.KeyMetadata), p: p, cc: cc, ctx: ctx, topic: topic, clean: true}
	call.run()
	p.pool.release(cc, call.clean)
	if call.notFound {
		p.topology.forget(topic)
	}
	return errs
}

// publishCall is the state of one PublishEach call.
type publishCall struct {
	*publishcall.Call // per-message outcomes, per-key failures, the waves
	p                 *Publisher
	cc                *confirmChannel
	ctx               context.Context
	topic             string
	clean             bool // every confirmation resolved: the channel can serve the next call
	// notFound says the exchange or a queue of the topic is missing (a 404 closed the channel,
	// or a message came back unroutable while the publisher manages the topology): the next
	// call declares the topic again.
	notFound bool
}

// inFlight is a message sent and awaiting its confirmation.
type inFlight struct {
	i       int
	confirm *amqp.DeferredConfirmation
}

// run sends the waves, each in chunks of at most maxWave messages.
func (c *publishCall) run() {
	c.Waves(func(wave []int) bool {
		for start := 0; start < len(wave); start += maxWave {
			if !c.send(wave[start:min(start+maxWave, len(wave))]) {
				c.clean = false
				return false
			}
		}
		return true
	}, c.heldBack)
}

// heldBack fails msgs[i], unsent: an earlier message of its key failed.
func (c *publishCall) heldBack(i int) {
	c.Errs[i] = fmt.Errorf("rabbitmq: publish message %s to %s: %w", publishcall.UUIDOf(c.Msgs[i]), c.topic, ErrEarlierMessageFailed)
}

// send publishes the messages of wave (none of a key with a failure) and waits for their
// confirmations. It reports false when the call was stopped (ctx done, publisher closing):
// every message without an outcome then has one.
func (c *publishCall) send(wave []int) bool {
	pending := make([]inFlight, 0, len(wave))
	for _, i := range wave {
		if c.stopped() != nil {
			break // await fails the rest
		}
		confirm, err := c.publish(i)
		if err != nil {
			c.Fail(i, err)
			continue
		}
		pending = append(pending, inFlight{i, confirm})
	}
	return c.await(pending)
}

// publish hands msgs[i] to the channel, mandatory: a message no queue is bound for comes back.
func (c *publishCall) publish(i int) (*amqp.DeferredConfirmation, error) {
	msg := c.Msgs[i]
	if msg == nil {
		return nil, fmt.Errorf("rabbitmq: publish to %s: message %d of %d is nil: %w", c.topic, i, len(c.Msgs), ErrInvalidMessage)
	}
	pub, err := c.p.publishing(msg)
	if err != nil {
		return nil, err
	}
	key := c.p.config.RoutingKey(c.topic, c.Key(i))
	confirm, err := c.cc.ch.PublishWithDeferredConfirmWithContext(c.ctx, c.topic, key, true, false, pub)
	if err != nil {
		c.clean = false
		return nil, fmt.Errorf("rabbitmq: publish message %s to %s (routing key %s): %w", msg.UUID, c.topic, key, err)
	}
	return confirm, nil
}

// await waits for the confirmation of every message in pending, each for at most
// Config.PublishTimeout. It reports false when the call was stopped (ctx done, publisher
// closing): every message without an outcome, sent or not, then fails with the reason.
func (c *publishCall) await(pending []inFlight) bool {
	timeout := time.NewTimer(c.p.config.PublishTimeout)
	defer timeout.Stop()
	timedOut := false
	for _, f := range pending {
		if timedOut {
			c.outcome(f, false)
			continue
		}
		select {
		case <-f.confirm.Done():
			c.outcome(f, true)
		case <-timeout.C:
			timedOut = true
			c.outcome(f, false)
		case <-c.ctx.Done():
			c.Acked[f.i] = c.resolvedAck(f)
		case <-c.p.closing:
			c.Acked[f.i] = c.resolvedAck(f)
		}
	}
	err := c.stopped()
	if err == nil {
		return true
	}
	for i := range c.Msgs {
		if c.Errs[i] == nil && !c.Acked[i] {
			c.Errs[i] = fmt.Errorf("rabbitmq: publish message %s to %s: no confirmation: %w", publishcall.UUIDOf(c.Msgs[i]), c.topic, err)
		}
	}
	return false
}

// resolvedAck reports whether f was confirmed and not returned, without waiting.
func (c *publishCall) resolvedAck(f inFlight) bool {
	select {
	case <-f.confirm.Done():
		c.outcome(f, true)
		return c.Errs[f.i] == nil
	default:
		c.clean = false
		return false
	}
}

// outcome records the outcome of f: done says its confirmation arrived; otherwise it timed out.
func (c *publishCall) outcome(f inFlight, done bool) {
	msg := c.Msgs[f.i]
	if !done {
		c.clean = false
		c.Fail(f.i, fmt.Errorf("rabbitmq: publish message %s to %s: after %s: %w", msg.UUID, c.topic, c.p.config.PublishTimeout, ErrConfirmTimeout))
		return
	}
	c.cc.drainReturns()
	if !f.confirm.Acked() {
		if reason := c.cc.closedErr(); reason != nil {
			var amqpErr *amqp.Error
			c.notFound = c.notFound || (errors.As(reason, &amqpErr) && amqpErr.Code == amqp.NotFound)
			c.clean = false
			if limit, ok := serverSizeLimit(reason); ok {
				c.p.learnServerLimit(limit)
				if len(msg.Payload) > limit {
					c.Fail(f.i, fmt.Errorf("rabbitmq: publish message %s to %s: payload of %d bytes refused by the server (%v): %w",
						msg.UUID, c.topic, len(msg.Payload), reason, ErrMessageTooLarge))
					return
				}
			}
			c.Fail(f.i, fmt.Errorf("rabbitmq: publish message %s to %s: channel closed before the confirmation: %w", msg.UUID, c.topic, reason))
			return
		}
		c.Fail(f.i, fmt.Errorf("rabbitmq: publish message %s to %s: %w", msg.UUID, c.topic, ErrNacked))
		return
	}
	if r, returned := c.cc.returned[msg.UUID]; returned {
		delete(c.cc.returned, msg.UUID)
		reason := ErrUnroutable // the operator's layout refuses the message
		if !c.p.config.DisableTopology {
			reason = ErrQueueMissing // the queue this publisher declared is gone: declare it again
			c.notFound = true
		}
		c.Fail(f.i, fmt.Errorf("rabbitmq: publish message %s to exchange %s, routing key %s: %d %s: %w",
			msg.UUID, r.Exchange, r.RoutingKey, r.ReplyCode, r.ReplyText, reason))
		return
	}
	c.Acked[f.i] = true
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
