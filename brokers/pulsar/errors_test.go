package pulsar_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// Retriable sorts pulsar-client-go's errors and this package's: what sending again cannot
// change is permanent, the rest retriable.
func TestRetriableClassifiesErrors(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("pulsar: publish message m to t: %w", err) }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"message too large", wrap(apulsar.ErrMessageTooLarge), false},
		{"metadata too large", wrap(apulsar.ErrMetaTooLarge), false},
		{"invalid message", wrap(apulsar.ErrInvalidMessage), false},
		{"schema", wrap(apulsar.ErrSchema), false},
		{"topic terminated", wrap(apulsar.ErrTopicTerminated), false},
		{"invalid topic", fmt.Errorf("%w: topic %q contains white space", pulsar.ErrInvalidTopic, "a b"), false},
		{"authorization (broker text)", errors.New("pulsar: create producer for persistent://a/b/c at pulsar://h:6650: not authorized: server error: AuthorizationError: Don't have permission"), true},
		{"authentication (broker text)", errors.New("server error: AuthenticationError: Failed to authenticate"), true},
		{"invalid topic name (broker text)", errors.New("server error: InvalidTopicName: bad"), false},
		{"send timeout", wrap(apulsar.ErrSendTimeout), true},
		{"queue full", wrap(apulsar.ErrSendQueueIsFull), true},
		{"memory buffer full", wrap(apulsar.ErrMemoryBufferIsFull), true},
		{"producer closed", wrap(apulsar.ErrProducerClosed), true},
		{"topic not found", wrap(apulsar.ErrTopicNotfound), true},
		{"producer busy (broker text)", errors.New("server error: ProducerBusy: producer with name already connected"), true},
		{"service not ready (broker text)", errors.New("server error: ServiceNotReady: namespace bundle is being unloaded"), true},
		{"connection error", errors.New("connection error"), true},
		{"deadline", wrap(context.DeadlineExceeded), true},
		{"publisher closed", wrap(pulsar.ErrPublisherClosed), true},
		{"earlier message failed", wrap(pulsar.ErrEarlierMessageFailed), true},
		{"acknowledged after failure", wrap(pulsar.ErrAcknowledgedAfterFailure), true},
		{"unknown", errors.New("something else"), true},
	}
	for _, tc := range cases {
		if got := pulsar.Retriable(tc.err); got != tc.want {
			t.Errorf("%s: Retriable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// The errors the real broker and publisher return for an oversized message and for a bad topic
// are permanent (the publisher's own Retriable, which the forwarder uses by default), and a
// healthy message's outcome is nil.
func TestPublisherClassifiesRealErrors(t *testing.T) {
	testsupport.PulsarURL(t)
	pub := newTestPublisher(t, nil)
	topic := testsupport.UniqueName("classify")
	big := message.NewMessage(watermill.NewUUID(), make([]byte, 6<<20))
	fine := message.NewMessage(watermill.NewUUID(), []byte("ok"))
	errs := pub.PublishEach(context.Background(), topic, []*message.Message{fine, big})
	if errs[0] != nil {
		t.Fatalf("healthy message: %v", errs[0])
	}
	if errs[1] == nil || pub.Retriable(errs[1]) {
		t.Errorf("oversized message: error %v, Retriable %v; want a permanent error", errs[1], pub.Retriable(errs[1]))
	}
	errs = pub.PublishEach(context.Background(), "bad topic", []*message.Message{fine})
	if errs[0] == nil || pub.Retriable(errs[0]) || !strings.Contains(errs[0].Error(), "bad topic") {
		t.Errorf("bad topic: error %v, Retriable %v; want a permanent error naming the topic", errs[0], pub.Retriable(errs[0]))
	}
}
