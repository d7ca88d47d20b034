package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
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
		fill(errs, fmt.Errorf("rabbitmq: publish to %s: %w", topic, ErrPublisherClosed))
		return errs
	}
	if len(msgs) == 0 {
		return errs
	}
	if err := checkTopic(topic); err != nil {
		fill(errs, err)
		return errs
	}
	if err := p.topology.ensure(ctx, topic); err != nil {
		fill(errs, fmt.Errorf("rabbitmq: publish to %s: %w", topic, err))
		return errs
	}
	cc, err := p.pool.acquire()
	if err != nil {
		fill(errs, fmt.Errorf("rabbitmq: publish to %s: %w", topic, err))
		return errs
	}
	call := &publishCall{p: p, cc: cc, ctx: ctx, topic: topic, msgs: msgs, errs: errs,
		acked: make([]bool, len(msgs)), failed: map[string]bool{}, clean: true}
	call.run()
	p.pool.release(cc, call.clean)
	if call.notFound {
		p.topology.forget(topic)
	}
	return errs
}

// publishCall is the state of one PublishEach call.
type publishCall struct {
	p      *Publisher
	cc     *confirmChannel
	ctx    context.Context
	topic  string
	msgs   []*message.Message
	errs   []error
	acked  []bool
	failed map[string]bool // keys with a failure
	clean  bool            // every confirmation resolved: the channel can serve the next call
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
	for _, wave := range waves(c.msgs, c.p.config.KeyMetadata) {
		for start := 0; start < len(wave); start += maxWave {
			if !c.send(wave[start:min(start+maxWave, len(wave))]) {
				c.clean = false
				return
			}
		}
	}
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

// send publishes the messages of wave whose key has no failure and waits for their
// confirmations. It reports false when the call was stopped (ctx done, publisher closing):
// every message without an outcome then has one.
func (c *publishCall) send(wave []int) bool {
	pending := make([]inFlight, 0, len(wave))
	for _, i := range wave {
		if c.stopped() != nil {
			break // await fails the rest
		}
		if c.failed[c.key(i)] {
			c.errs[i] = fmt.Errorf("rabbitmq: publish message %s to %s: %w", c.msgs[i].UUID, c.topic, ErrEarlierMessageFailed)
			continue
		}
		confirm, err := c.publish(i)
		if err != nil {
			c.fail(i, err)
			continue
		}
		pending = append(pending, inFlight{i, confirm})
	}
	return c.await(pending)
}

// publish hands msgs[i] to the channel, mandatory: a message no queue is bound for comes back.
func (c *publishCall) publish(i int) (*amqp.DeferredConfirmation, error) {
	msg := c.msgs[i]
	if msg == nil {
		return nil, fmt.Errorf("rabbitmq: publish to %s: message %d of %d is nil: %w", c.topic, i, len(c.msgs), ErrInvalidMessage)
	}
	pub, err := c.p.publishing(msg)
	if err != nil {
		return nil, err
	}
	key := c.p.config.RoutingKey(c.topic, c.key(i))
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
			c.acked[f.i] = c.resolvedAck(f)
		case <-c.p.closing:
			c.acked[f.i] = c.resolvedAck(f)
		}
	}
	err := c.stopped()
	if err == nil {
		return true
	}
	for i := range c.msgs {
		if c.errs[i] == nil && !c.acked[i] {
			c.errs[i] = fmt.Errorf("rabbitmq: publish message %s to %s: no confirmation: %w", uuidOf(c.msgs[i]), c.topic, err)
		}
	}
	return false
}

// resolvedAck reports whether f was confirmed and not returned, without waiting.
func (c *publishCall) resolvedAck(f inFlight) bool {
	select {
	case <-f.confirm.Done():
		c.outcome(f, true)
		return c.errs[f.i] == nil
	default:
		c.clean = false
		return false
	}
}

// outcome records the outcome of f: done says its confirmation arrived; otherwise it timed out.
func (c *publishCall) outcome(f inFlight, done bool) {
	msg := c.msgs[f.i]
	if !done {
		c.clean = false
		c.fail(f.i, fmt.Errorf("rabbitmq: publish message %s to %s: after %s: %w", msg.UUID, c.topic, c.p.config.PublishTimeout, ErrConfirmTimeout))
		return
	}
	c.cc.drainReturns()
	if !f.confirm.Acked() {
		if reason := c.cc.closedErr(); reason != nil {
			var amqpErr *amqp.Error
			c.notFound = c.notFound || (errors.As(reason, &amqpErr) && amqpErr.Code == amqp.NotFound)
			c.clean = false
			c.fail(f.i, fmt.Errorf("rabbitmq: publish message %s to %s: channel closed before the confirmation: %w", msg.UUID, c.topic, reason))
			return
		}
		c.fail(f.i, fmt.Errorf("rabbitmq: publish message %s to %s: %w", msg.UUID, c.topic, ErrNacked))
		return
	}
	if r, returned := c.cc.returned[msg.UUID]; returned {
		delete(c.cc.returned, msg.UUID)
		reason := ErrUnroutable // the operator's layout refuses the message
		if !c.p.config.DisableTopology {
			reason = ErrQueueMissing // the queue this publisher declared is gone: declare it again
			c.notFound = true
		}
		c.fail(f.i, fmt.Errorf("rabbitmq: publish message %s to exchange %s, routing key %s: %d %s: %w",
			msg.UUID, r.Exchange, r.RoutingKey, r.ReplyCode, r.ReplyText, reason))
		return
	}
	c.acked[f.i] = true
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
