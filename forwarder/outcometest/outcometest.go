// Package outcometest is the conformance suite of forwarder.OutcomePublisher, in the style of
// Watermill's pubsub/tests: every publisher with per-message outcomes (brokers/kafka,
// brokers/pulsar, the CloudEvents decorator, the forwarder's waves for a plain Watermill
// publisher, and every broker added later) runs TestOutcomePublisher against its real broker.
//
// The suite publishes outbox events (outbox.Event.ToMessage: the key is the aggregate id, in
// the aggregate_id metadata entry) and checks the contract of forwarder.OutcomePublisher, on the
// outcomes and on what the broker holds afterwards:
//
//   - exactly len(msgs) outcomes, an empty call included;
//   - per-key order on the broker, and every acknowledged message on the broker;
//   - gapless failures per key: once msgs[i] failed, every later message of its key failed
//     too, and none of them is on the broker while msgs[i] is not;
//   - a permanent refusal is the message's own: an oversized message (and any other kind of
//     message the publisher refuses, Features.Refusals) fails alone with an error the
//     publisher's own classifier (forwarder.ErrorClassifier) calls permanent, the later
//     messages of its key fail with retriable errors, the other keys are delivered;
//   - a retriable failure (a cancelled context, a deadline) is classified retriable and is not
//     lost: sent again, it is delivered;
//   - concurrent calls, and Close while calls are in flight (every call returns, with outcomes
//     that are true of the broker; later calls fail, retriably).
//
// A broker test passes Features (what the publisher must refuse, what it is allowed to do), a
// PublisherConstructor and a Broker: how to make a fresh topic, and how to read a topic back
// (ids and keys in the broker's order per key). With CI=true a missing
// broker must fail the test, never skip it (internal/testsupport does this).
package outcometest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// Publisher is the publisher under test: per-message outcomes and Close.
type Publisher interface {
	forwarder.OutcomePublisher
	Close() error
}

// PublisherConstructor returns a new, connected publisher under test. The suite closes it
// (some cases while calls are in flight); the constructor may register a cleanup closing it
// again, Close being idempotent.
type PublisherConstructor func(t *testing.T) Publisher

// Received is a message read back from the broker.
type Received struct {
	// UUID is the Watermill message UUID the publisher sent.
	UUID string
	// Key is the broker's own partition or ordering key of the message (the Kafka record key,
	// the Pulsar message key), which must be the message's key metadata.
	Key string
}

// Broker is what the suite needs from the broker under test besides the publisher.
type Broker struct {
	// NewTopic returns the name of a new, empty topic that accepts messages now (create it
	// first where a topic just created refuses messages for a moment, as Kafka does).
	NewTopic func(t *testing.T) string
	// ReadTopic returns every message on topic, from its start, in the broker's order per key
	// (for Kafka: the records of each partition in offset order). It is called after the
	// publish calls returned and must return all that the broker holds then, without waiting
	// for more.
	ReadTopic func(t *testing.T, topic string) []Received
}

// Features says what the publisher under test supports and how to exercise it.
type Features struct {
	// OversizedPayload is the size of a payload the publisher must refuse, permanently and
	// alone (above its configured or the broker's message size limit). 0 leaves the oversized
	// message out of TestRefusedFailsAlone, for a publisher without a size limit.
	OversizedPayload int
	// Refusals are other messages the publisher must refuse, permanently and alone, besides an
	// oversized one (a decorator's own validation, a reserved metadata entry): the suite runs
	// TestRefusedFailsAlone's scenario for each.
	Refusals []Refusal
	// DuplicatesOnFailure says that a call in which a message failed may deliver other
	// messages of the call twice, which the contract allows (at-least-once, deduplicated by
	// the consumer): the forwarder's waves send a failed call's messages again one by one to
	// find the failing ones, since a plain Watermill publisher does not say which failed. When
	// false, the suite checks that every message is on the broker at most once after the
	// oversized case too.
	DuplicatesOnFailure bool
	// SendsAfterCancel says that the publisher may still send, and acknowledge, messages of a
	// call whose context was done before the call (a plain Watermill publisher's Publish takes
	// no context). When false, such a call must fail every message.
	SendsAfterCancel bool
	// CallTimeout bounds each PublishEach call and Close: a call or Close still running after
	// it is a failure (a hang). Default 30 seconds.
	CallTimeout time.Duration
	// Retriable classifies the publisher's errors when the publisher has no Retriable method
	// (forwarder.ErrorClassifier) of its own. The publisher's own classifier wins: it is what
	// the forwarder uses.
	Retriable func(error) bool
}

// Refusal is a kind of message the publisher must refuse with a permanent error of its own.
type Refusal struct {
	// Name names the subtest.
	Name string
	// Spoil turns a good message of the suite (an outbox event) into one the publisher refuses.
	Spoil func(msg *message.Message)
	// KnownDeviation, when not empty, skips the subtest with this text: how the publisher is
	// known to deviate from the contract on this refusal, kept visible until it is fixed.
	KnownDeviation string
}

// callTimeout is CallTimeout or its default.
func (f Features) callTimeout() time.Duration {
	if f.CallTimeout == 0 {
		return 30 * time.Second
	}
	return f.CallTimeout
}

// TestContext is what each case of the suite gets.
type TestContext struct {
	Features     Features
	NewPublisher PublisherConstructor
	Broker       Broker
}

// TestOutcomePublisher runs every case of the suite, each in a subtest of its own with a new
// topic and a new publisher. Each case is also exported (TestEmptyCall, ...), to run one alone.
func TestOutcomePublisher(t *testing.T, features Features, newPublisher PublisherConstructor, broker Broker) {
	tc := TestContext{Features: features, NewPublisher: newPublisher, Broker: broker}
	for _, c := range []struct {
		name string
		run  func(*testing.T, TestContext)
	}{
		{"EmptyCall", TestEmptyCall},
		{"ManyKeysInterleaved", TestManyKeysInterleaved},
		{"RefusedFailsAlone", TestRefusedFailsAlone},
		{"CancelledContext", TestCancelledContext},
		{"ShortDeadline", TestShortDeadline},
		{"ConcurrentCalls", TestConcurrentCalls},
		{"CloseWhileInFlight", TestCloseWhileInFlight},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, tc) })
	}
}

// aggregateType is the aggregate type of the suite's events.
const aggregateType = "outcometest"

// batch is the messages of one PublishEach call, with their keys.
type batch struct {
	msgs []*message.Message
	keys []string
}

// add appends an event of key.
func (b *batch) add(key string) {
	id := uuid.Must(uuid.NewV7())
	payload := fmt.Appendf(nil, "%s/%d", key, len(b.msgs))
	e := outbox.Event{ID: id, AggregateType: aggregateType, AggregateID: key, EventType: "outcometest.Published",
		Payload: payload, CreatedAt: time.Now()}
	b.msgs = append(b.msgs, e.ToMessage())
	b.keys = append(b.keys, key)
}

// interleaved returns n messages of each key, interleaved: the key of each position rotates,
// shifted every round so that the keys do not always follow each other in the same order.
func interleaved(prefix string, keys, n int) *batch {
	b := &batch{}
	for round := range n {
		for k := range keys {
			b.add(fmt.Sprintf("%s-%d", prefix, (k+round)%keys))
		}
	}
	return b
}

// call calls PublishEach and reports false when it does not return within timeout.
func call(ctx context.Context, pub Publisher, topic string, b *batch, timeout time.Duration) ([]error, bool) {
	done := make(chan []error, 1)
	go func() { done <- pub.PublishEach(ctx, topic, b.msgs) }()
	select {
	case errs := <-done:
		return errs, true
	case <-time.After(timeout):
		return nil, false
	}
}

// publish calls PublishEach, fails the test when it does not return within the call timeout
// and checks the number of outcomes.
func publish(ctx context.Context, t *testing.T, tc TestContext, pub Publisher, topic string, b *batch) []error {
	t.Helper()
	errs, ok := call(ctx, pub, topic, b, tc.Features.callTimeout())
	if !ok {
		t.Fatalf("contract violation (ctx bounds the call): PublishEach of %d messages has not returned after %s",
			len(b.msgs), tc.Features.callTimeout())
	}
	checkCount(t, b, errs)
	return errs
}

// classifier returns the classifier the forwarder would use for pub.
func classifier(t *testing.T, tc TestContext, pub Publisher) func(error) bool {
	t.Helper()
	if c, ok := pub.(forwarder.ErrorClassifier); ok {
		return c.Retriable
	}
	if tc.Features.Retriable != nil {
		return tc.Features.Retriable
	}
	t.Fatalf("publisher %T has no Retriable method (forwarder.ErrorClassifier) and Features.Retriable is nil: "+
		"the forwarder would take every error as retriable and never dead-letter a refused message", pub)
	return nil
}
