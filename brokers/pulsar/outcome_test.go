package pulsar_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// The forwarder uses Publisher's per-message outcomes (structural interface).
var _ forwarder.OutcomePublisher = (*pulsar.Publisher)(nil)

// keyedMessage returns a message of key with payload "<key>/<seq>".
func keyedMessage(key string, seq int, payload []byte) *message.Message {
	if payload == nil {
		payload = fmt.Appendf(nil, "%s/%d", key, seq)
	}
	msg := message.NewMessage(watermill.NewUUID(), payload)
	msg.Metadata.Set("aggregate_id", key)
	msg.Metadata.Set("seq", fmt.Sprint(seq))
	return msg
}

// readTopic reads persistent://public/default/<topic> from the start with a plain
// pulsar-client-go consumer until done says it has what the test expects (up to 2 minutes, a
// bound against a hang), then on until no message arrived for 3 s, and returns what it got. The
// quiet period lets messages that must not be there show up; it can miss a late one, never fail
// the test for being slow.
func readTopic(t *testing.T, topic string, done func(got []apulsar.Message) bool) []apulsar.Message {
	t.Helper()
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: testsupport.PulsarURL(t), Logger: pulsar.NewClientLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: "persistent://public/default/" + topic, SubscriptionName: "raw", Type: apulsar.Exclusive,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var got []apulsar.Message
	deadline := time.Now().Add(2 * time.Minute)
	for {
		wait := 3 * time.Second
		if !done(got) {
			wait = time.Until(deadline)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		msg, err := consumer.Receive(ctx)
		cancel()
		if err != nil {
			return got
		}
		_ = consumer.Ack(msg)
		got = append(got, msg)
	}
}

// TestPublishEachOversizedKeepsKeyGapless publishes interleaved keys K, A and B with one
// message of K too large for the broker in the middle. The earlier K messages and every A
// and B message are delivered; the large one and the later K messages fail and are not in
// the topic. Two sizes: a payload above MaxMessageSize, and a payload just below it whose
// properties take it above (pulsar-client-go only notices that one when it flushes the
// batch, after the other messages were queued).
func TestPublishEachOversizedKeepsKeyGapless(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload int
		prop    int // size of an extra property of the large message
	}{
		{"payload_above_limit", 6 << 20, 0},
		{"metadata_takes_it_above", pulsar.DefaultMaxMessageSize - 256, 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := testsupport.UniqueName("each_large")
			pub := newTestPublisher(t, func(c *pulsar.PublisherConfig) { c.SendTimeout = 20 * time.Second })

			var msgs []*message.Message
			const perKey = 6
			const largeAt = 3 // index of the large message among K's
			for seq := range perKey {
				for _, key := range []string{"A", "K", "B"} {
					var payload []byte
					if key == "K" && seq == largeAt {
						payload = bytes.Repeat([]byte("x"), tc.payload)
					}
					msg := keyedMessage(key, seq, payload)
					if payload != nil && tc.prop > 0 {
						msg.Metadata.Set("padding", strings.Repeat("p", tc.prop))
					}
					msgs = append(msgs, msg)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs := pub.PublishEach(ctx, topic, msgs)
			if len(errs) != len(msgs) {
				t.Fatalf("%d errors for %d messages", len(errs), len(msgs))
			}
			want := map[string]bool{} // UUIDs that must be in the topic
			for i, msg := range msgs {
				key, seq := msg.Metadata.Get("aggregate_id"), msg.Metadata.Get("seq")
				switch {
				case key != "K" || seq < fmt.Sprint(largeAt): // one-digit sequence numbers
					if errs[i] != nil {
						t.Errorf("%s/%s: %v, want delivered", key, seq, errs[i])
					}
					want[msg.UUID] = true
				case seq == fmt.Sprint(largeAt):
					if !errors.Is(errs[i], apulsar.ErrMessageTooLarge) || !strings.Contains(errs[i].Error(), msg.UUID) ||
						!strings.Contains(errs[i].Error(), topic) {
						t.Errorf("large message: %v, want ErrMessageTooLarge naming %s and the topic", errs[i], msg.UUID)
					}
				default:
					if !errors.Is(errs[i], pulsar.ErrEarlierMessageFailed) {
						t.Errorf("%s/%s after the large one: %v, want ErrEarlierMessageFailed", key, seq, errs[i])
					}
				}
			}

			delivered := len(want)
			got := readTopic(t, topic, func(got []apulsar.Message) bool { return len(got) >= delivered })
			next := map[string]int{}
			for _, m := range got {
				uuid := m.Properties()[pulsar.UUIDProperty]
				if !want[uuid] {
					t.Errorf("topic has %s/%s (%s), which must not have been delivered",
						m.Key(), m.Properties()["seq"], uuid)
					continue
				}
				delete(want, uuid)
				if seq := m.Properties()["seq"]; seq != fmt.Sprint(next[m.Key()]) {
					t.Errorf("key %s: got seq %s, want %d", m.Key(), seq, next[m.Key()])
				}
				next[m.Key()]++
			}
			if len(want) > 0 {
				t.Errorf("%d acknowledged messages not in the topic", len(want))
			}
			t.Logf("in topic: %d messages, per key %v", len(got), next)
		})
	}
}

// TestPublishEachSingleKeyInOrder: 1000 messages of one key, all acknowledged, arrive in order.
func TestPublishEachSingleKeyInOrder(t *testing.T) {
	topic := testsupport.UniqueName("each_order")
	pub := newTestPublisher(t, nil)
	const n = 1000
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = keyedMessage("only", i, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := pub.PublishEach(ctx, topic, msgs)
	if len(errs) != n {
		t.Fatalf("%d errors for %d messages", len(errs), n)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	got := readTopic(t, topic, func(got []apulsar.Message) bool { return len(got) >= n })
	if len(got) != n {
		t.Fatalf("topic has %d messages, want %d", len(got), n)
	}
	for i, m := range got {
		if m.Key() != "only" || m.OrderingKey() != "only" || m.Properties()[pulsar.UUIDProperty] != msgs[i].UUID {
			t.Fatalf("position %d: key %q seq %s uuid %s, want only/%d %s",
				i, m.Key(), m.Properties()["seq"], m.Properties()[pulsar.UUIDProperty], i, msgs[i].UUID)
		}
	}
}

// TestPublishEachOutcomeCount: exactly one outcome per message on every early path.
func TestPublishEachOutcomeCount(t *testing.T) {
	pub := newTestPublisher(t, nil)
	ctx := context.Background()
	if errs := pub.PublishEach(ctx, "orders", nil); len(errs) != 0 {
		t.Errorf("no messages: %d outcomes", len(errs))
	}
	three := func() []*message.Message {
		return []*message.Message{keyedMessage("a", 0, nil), keyedMessage("a", 1, nil), keyedMessage("b", 0, nil)}
	}
	for _, topic := range []string{"", "a/b", "with space"} {
		errs := pub.PublishEach(ctx, topic, three())
		if len(errs) != 3 || errs[0] == nil || errs[1] == nil || errs[2] == nil {
			t.Errorf("bad topic %q: outcomes %v", topic, errs)
		}
	}

	// Refused before sending: nil message (key-less), reserved metadata.
	topic := testsupport.UniqueName("each_refused")
	reserved := keyedMessage("a", 0, nil)
	reserved.Metadata.Set(pulsar.UUIDProperty, "something else")
	msgs := []*message.Message{nil, keyedMessage("", 1, nil), reserved, keyedMessage("a", 1, nil), keyedMessage("b", 0, nil)}
	delete(msgs[1].Metadata, "aggregate_id")
	errs := pub.PublishEach(ctx, topic, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("%d outcomes for %d messages", len(errs), len(msgs))
	}
	if !errors.Is(errs[0], apulsar.ErrInvalidMessage) || !strings.Contains(errs[0].Error(), "message 0 of 5 is nil") {
		t.Errorf("nil message: %v", errs[0])
	}
	if !errors.Is(errs[1], pulsar.ErrEarlierMessageFailed) {
		t.Errorf("key-less message after the nil one: %v, want ErrEarlierMessageFailed", errs[1])
	}
	if !errors.Is(errs[2], apulsar.ErrInvalidMessage) || !strings.Contains(errs[2].Error(), pulsar.UUIDProperty) {
		t.Errorf("reserved metadata: %v", errs[2])
	}
	if !errors.Is(errs[3], pulsar.ErrEarlierMessageFailed) {
		t.Errorf("after the reserved one: %v, want ErrEarlierMessageFailed", errs[3])
	}
	if errs[4] != nil {
		t.Errorf("other key: %v", errs[4])
	}

	_ = pub.Close()
	errs = pub.PublishEach(ctx, topic, three())
	if len(errs) != 3 {
		t.Fatalf("after Close: %d outcomes", len(errs))
	}
	for i, err := range errs {
		if !errors.Is(err, pulsar.ErrPublisherClosed) || !strings.Contains(err.Error(), topic) {
			t.Errorf("after Close, message %d: %v", i, err)
		}
	}
}

// TestPublishEachGivesUpAndRecovers: a caller's context that ends before the
// acknowledgements (before sending, and while 1000 messages are in flight) fails every
// message not acknowledged, one outcome each and gapless per key; the producer is replaced,
// so what reached the topic is, per key, a prefix in order; and the next call works.
func TestPublishEachGivesUpAndRecovers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration
	}{
		{"before_sending", time.Microsecond},
		{"in_flight", 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := testsupport.UniqueName("each_cancel")
			pub := newTestPublisher(t, nil)
			if err := pub.Connect(topic); err != nil {
				t.Fatal(err)
			}
			msgs := make([]*message.Message, 1000)
			for i := range msgs {
				msgs[i] = keyedMessage(fmt.Sprintf("k%d", i%4), i/4, nil)
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
			defer cancel()
			errs := pub.PublishEach(ctx, topic, msgs)
			if len(errs) != len(msgs) {
				t.Fatalf("%d outcomes for %d messages", len(errs), len(msgs))
			}
			failedKey := map[string]bool{}
			failures := 0
			for i, err := range errs {
				key := msgs[i].Metadata.Get("aggregate_id")
				if err != nil {
					failures++
					failedKey[key] = true
				} else if failedKey[key] {
					t.Errorf("message %d of key %s succeeded after a failure of its key", i, key)
				}
			}
			if failures == 0 {
				t.Fatalf("no failure with a context that ended after %s", tc.deadline)
			}
			t.Logf("%d of %d failed; last error: %v", failures, len(msgs), errs[len(errs)-1])

			ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
			defer cancel2()
			for i, err := range pub.PublishEach(ctx2, topic, []*message.Message{keyedMessage("after", 0, nil)}) {
				if err != nil {
					t.Fatalf("next call, message %d: %v", i, err)
				}
			}
			next := map[string]int{}
			// The next call's message is the last one published: read until it is in.
			for _, m := range readTopic(t, topic, func(got []apulsar.Message) bool {
				return len(got) > 0 && got[len(got)-1].Key() == "after"
			}) {
				if seq := m.Properties()["seq"]; seq != fmt.Sprint(next[m.Key()]) {
					t.Errorf("key %s: seq %s in the topic, want %d (not a prefix in order)", m.Key(), seq, next[m.Key()])
				}
				next[m.Key()]++
			}
			if next["after"] != 1 {
				t.Errorf("the next call's message: %d in the topic, want 1", next["after"])
			}
			t.Logf("in the topic per key: %v", next)
		})
	}
}
