package forwarder

import (
	"context"

	"github.com/ThreeDotsLabs/watermill/message"
)

// OutcomePublisher is an optional interface of a Config.Publisher that publishes many messages of
// one topic at once and reports the outcome of each. The forwarder uses it when the publisher has
// it (brokers/kafka and brokers/pulsar do) and falls back to message.Publisher's Publish, one
// event per key per call, otherwise.
//
// PublishEach sends msgs, in the given order, to topic and returns once every message is either
// acknowledged by the broker or has failed. It returns exactly len(msgs) errors: errs[i] is nil
// when msgs[i] was acknowledged. Messages with the same partition key must reach the broker in
// the given order, and the failures must be gapless per key: when msgs[i] fails, every later
// message of the same key in the call must fail too (and not be delivered), so that a key can
// be parked behind its first failure without being reordered. A permanent (non-retriable) error
// must be the message's own: if the broker refused a request of several messages whole (for
// example, too large because of one of them), the publisher must find out which message is at
// fault (brokers/kafka sends it alone once) rather than fail the innocent ones with it, since
// the forwarder dead-letters a message on its permanent error. PublishEach must be safe for
// concurrent use; ctx bounds the whole call.
type OutcomePublisher interface {
	PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
}

// ErrorClassifier is an optional interface of a Config.Publisher that knows its broker's errors:
// Retriable reports whether err, returned by one of its publish calls, may succeed when the
// message is sent again (a broker outage, a timeout, a missing permission an operator grants) or
// not (a message too large for the broker, an invalid topic). When Config.IsRetriable is nil the forwarder uses the
// publisher's Retriable (brokers/kafka and brokers/pulsar have one), and takes every error as
// retriable otherwise. A decorating publisher forwards the classifier of the publisher it wraps.
type ErrorClassifier interface {
	Retriable(err error) bool
}

// defaultClassifier is Config.IsRetriable's default for pub: its own classifier, or every error
// retriable.
func defaultClassifier(pub any) func(error) bool {
	if c, ok := pub.(ErrorClassifier); ok {
		return c.Retriable
	}
	return func(error) bool { return true }
}

// OutageClassifier is an optional interface of a Config.Publisher that tells an outage of
// something every event needs from a failure of the event: Unavailable reports whether err,
// returned for a message by one of its publish calls, says that the message could not be tried
// at all (brokers/schema's publisher: the schema registry did not answer). Such a failure
// spends none of the event's attempts, dead-letters nothing and parks no key: the event stays
// pending, untouched (its key's later events behind it), and is tried again by the next
// batches; the delivery counts as failed, so that the source backs off (polling, up to
// MaxPollInterval), a spell of them raises the stall warning and
// outboxkit_forwarder_publish_stalled after PublishStallAfter, and
// outboxkit_forwarder_unavailable_total counts the events. Delivery resumes by itself once the
// dependency answers. A decorating publisher forwards the classifier of the publisher it wraps.
type OutageClassifier interface {
	Unavailable(err error) bool
}

// outageClassifierOf is pub's OutageClassifier, or nil when it has none (every failure is the
// event's).
func outageClassifierOf(pub any) func(error) bool {
	if c, ok := pub.(OutageClassifier); ok {
		return c.Unavailable
	}
	return nil
}
