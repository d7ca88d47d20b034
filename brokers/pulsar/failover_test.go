package pulsar_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestFailoverStandbyTakesOver covers the failover handovers that the universal suite's
// failover run no longer makes in a burst (see TestUniversalPubSub): a second instance joins
// a failover subscription while the first is consuming, then the first one leaves, and every
// message published along the way reaches one of them (at-least-once: a handover may
// redeliver what the previous active consumer had not acked yet).
func TestFailoverStandbyTakesOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := testsupport.UniqueName("failover")
	failover := func(c *pulsar.SubscriberConfig) {
		c.SubscriptionName = "failover"
		c.SubscriptionType = pulsar.SubscriptionFailover
	}
	pub := newTestPublisher(t, nil)
	first := newTestSubscriber(t, failover)
	if err := first.SubscribeInitialize(topic); err != nil {
		t.Fatal(err)
	}
	firstCh, err := first.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	batch := publishBatch(t, pub, topic, "before", 10)
	receiveAll(ctx, t, batch, firstCh)

	second := newTestSubscriber(t, failover)
	secondCh, err := second.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	batch = publishBatch(t, pub, topic, "joined", 10)
	receiveAll(ctx, t, batch, firstCh, secondCh)

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	batch = publishBatch(t, pub, topic, "left", 10)
	receiveAll(ctx, t, batch, secondCh)
}

// publishBatch publishes n messages and returns their UUIDs.
func publishBatch(t *testing.T, pub message.Publisher, topic, label string, n int) map[string]bool {
	t.Helper()
	uuids := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		msg := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprintf("%s-%d", label, i)))
		if err := pub.Publish(topic, msg); err != nil {
			t.Fatalf("publish %s-%d: %v", label, i, err)
		}
		uuids[msg.UUID] = true
	}
	return uuids
}

// receiveAll acks what arrives on any of chans until every UUID in want was seen, ignoring
// redeliveries and messages of earlier batches; it fails when ctx ends first.
func receiveAll(ctx context.Context, t *testing.T, want map[string]bool, chans ...<-chan *message.Message) {
	t.Helper()
	merged := make(chan *message.Message)
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range chans {
		go func() {
			for {
				select {
				case msg, ok := <-ch:
					if !ok {
						return
					}
					select {
					case merged <- msg:
					case <-stop:
						// Not acked: the broker redelivers it to whoever reads next.
						msg.Nack()
						return
					}
				case <-stop:
					return
				}
			}
		}()
	}
	seen := 0
	for seen < len(want) {
		select {
		case msg := <-merged:
			if want[msg.UUID] {
				want[msg.UUID] = false
				seen++
			}
			msg.Ack()
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages: %v", seen, len(want), ctx.Err())
		}
	}
}
