package outcometest

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// newPublisher returns a new publisher under test, closed at the end of the test.
func newPublisher(t *testing.T, tc TestContext) Publisher {
	t.Helper()
	pub := tc.NewPublisher(t)
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// TestEmptyCall checks that a call without messages returns no outcome and sends nothing.
func TestEmptyCall(t *testing.T, tc TestContext) {
	pub, topic := newPublisher(t, tc), tc.Broker.NewTopic(t)
	for _, msgs := range [][]*message.Message{nil, {}} {
		publish(context.Background(), t, tc, pub, topic, &batch{msgs: msgs})
	}
	if got := tc.Broker.ReadTopic(t, topic); len(got) != 0 {
		t.Errorf("an empty call left %d messages on the broker", len(got))
	}
}

// TestManyKeysInterleaved publishes 20 messages of each of 10 keys, interleaved, in one call:
// every message is acknowledged and on the broker once, each key in order.
func TestManyKeysInterleaved(t *testing.T, tc TestContext) {
	pub, topic := newPublisher(t, tc), tc.Broker.NewTopic(t)
	b := interleaved("key", 10, 20)
	errs := publish(context.Background(), t, tc, pub, topic, b)
	checkAllAcked(t, b, errs)
	at := locate(t, tc.Broker.ReadTopic(t, topic), b)
	checkBroker(t, b, errs, at, true)
	checkOnce(t, b, at)
}

// TestRefusedFailsAlone publishes two messages the publisher must refuse (oversized, when
// Features.OversizedPayload is set, then each of Features.Refusals, in subtests) among good
// ones: one the first of the call (key d), one in the middle of its key (key a), with keys b and
// c beside them. Each refused message fails with an error the publisher's classifier calls
// permanent; the later messages of its key fail with retriable errors (held back, not at fault)
// and are not on the broker; the earlier message of key a and every message of b and c are
// acknowledged.
func TestRefusedFailsAlone(t *testing.T, tc TestContext) {
	refusals := tc.Features.Refusals
	if size := tc.Features.OversizedPayload; size > 0 {
		oversized := Refusal{Name: "Oversized", Spoil: func(msg *message.Message) {
			msg.Payload = make([]byte, size)
			_, _ = rand.Read(msg.Payload) // incompressible: a compressing publisher must not shrink it below the limit
		}}
		refusals = append([]Refusal{oversized}, refusals...)
	}
	if len(refusals) == 0 {
		t.Skip("Features.OversizedPayload is 0 and Features.Refusals is empty: no message for the publisher to refuse")
	}
	for _, r := range refusals {
		t.Run(r.Name, func(t *testing.T) { refusedAlone(t, tc, r) })
	}
}

// refusedAlone is a subtest of TestRefusedFailsAlone.
func refusedAlone(t *testing.T, tc TestContext, r Refusal) {
	if r.KnownDeviation != "" {
		t.Skip("known deviation from the contract: " + r.KnownDeviation)
	}
	pub, topic := newPublisher(t, tc), tc.Broker.NewTopic(t)
	retriable := classifier(t, tc, pub)
	b := &batch{}
	for _, key := range []string{"d", "a", "b", "c", "a", "b", "c", "a", "d", "b", "a", "c"} {
		b.add(key)
	}
	refused := map[string]int{"d": 0, "a": 4}
	for _, i := range refused {
		r.Spoil(b.msgs[i])
	}
	errs := publish(context.Background(), t, tc, pub, topic, b)
	for i, err := range errs {
		key := b.keys[i]
		first, hasRefusal := refused[key]
		switch {
		case !hasRefusal || i < first:
			if err != nil {
				t.Errorf("contract violation (a permanent refusal is the message's own): message %d (key %s) is innocent "+
					"and failed with the refused message of another key or before its own key's refusal: %v", i, key, err)
			}
		case i == first && err == nil:
			t.Errorf("message %d (key %s, refused: %s) was acknowledged: it is not a message the publisher refuses", i, key, r.Name)
		case i == first && retriable(err):
			t.Errorf("contract violation (a permanent refusal is its own outcome): message %d (key %s) is refused (%s), "+
				"but the classifier calls its error retriable, so the forwarder would retry it until its attempts "+
				"run out instead of dead-lettering it: %v", i, key, r.Name, err)
		case i > first && err != nil && !retriable(err):
			t.Errorf("contract violation (a permanent refusal is the message's own): message %d (key %s) was held back "+
				"behind its key's refused message, but its error is permanent, as if it were at fault: %v", i, key, err)
		}
	}
	checkGapless(t, b, errs)
	at := locate(t, tc.Broker.ReadTopic(t, topic), b)
	checkBroker(t, b, errs, at, true)
	if !tc.Features.DuplicatesOnFailure {
		checkOnce(t, b, at)
	}
}

// TestCancelledContext publishes with a context cancelled before the call: whatever is
// reported acknowledged is on the broker, the failures are gapless and retriable, and sent
// again with a live context they are delivered (a retriable failure is not lost).
// Unless Features.SendsAfterCancel, every message must fail: nothing is sent once ctx is done.
func TestCancelledContext(t *testing.T, tc TestContext) {
	b := interleaved("cancelled", 3, 10)
	errs := retriableFailure(t, tc, b, func(time.Duration) (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	})
	for i, err := range errs {
		if err == nil && !tc.Features.SendsAfterCancel {
			t.Errorf("contract violation (ctx bounds the call): message %d (key %s, %s) was sent and acknowledged "+
				"with a context cancelled before the call (Features.SendsAfterCancel is false)", i, b.keys[i], b.msgs[i].UUID)
		}
	}
}

// TestShortDeadline is TestCancelledContext with a deadline that ends while the 1,000 messages
// of the call are being sent or acknowledged: a third of the time the same call took just
// before.
func TestShortDeadline(t *testing.T, tc TestContext) {
	retriableFailure(t, tc, interleaved("deadline", 10, 100), func(took time.Duration) (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), took/3)
	})
}

// retriableFailure publishes two calls like b with a live context (warming the publisher up
// and timing it), then b with the context of withCtx, and checks the outcomes; then it sends the
// failed messages again with a live context and checks that all of b is on the broker, each key
// in order. It returns the outcomes of b's first call.
func retriableFailure(t *testing.T, tc TestContext, b *batch, withCtx func(took time.Duration) (context.Context, context.CancelFunc)) []error {
	pub, topic := newPublisher(t, tc), tc.Broker.NewTopic(t)
	retriable := classifier(t, tc, pub)
	var took time.Duration
	for round := range 2 { // the first round connects, the second one is timed
		warmUp := &batch{}
		for _, key := range b.keys {
			warmUp.add(fmt.Sprintf("warm-up%d-%s", round, key))
		}
		start := time.Now()
		checkAllAcked(t, warmUp, publish(context.Background(), t, tc, pub, topic, warmUp))
		took = time.Since(start)
	}
	ctx, cancel := withCtx(took)
	defer cancel()
	errs := publish(ctx, t, tc, pub, topic, b)
	checkGapless(t, b, errs)
	checkRetriable(t, b, errs, retriable)
	checkBroker(t, b, errs, locate(t, tc.Broker.ReadTopic(t, topic), b), false)

	again := &batch{}
	for i, err := range errs {
		if err != nil {
			again.msgs, again.keys = append(again.msgs, b.msgs[i]), append(again.keys, b.keys[i])
		}
	}
	t.Logf("%d of %d messages acknowledged before the context ended; sending the %d others again",
		len(b.msgs)-len(again.msgs), len(b.msgs), len(again.msgs))
	if len(again.msgs) > 0 {
		checkAllAcked(t, again, publish(context.Background(), t, tc, pub, topic, again))
		checkBroker(t, b, make([]error, len(b.msgs)), locate(t, tc.Broker.ReadTopic(t, topic), b), false)
	}
	return errs
}
