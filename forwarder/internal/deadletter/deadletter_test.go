package deadletter

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/outboxkit/outboxkit/outbox"
)

// TestNextIsWholeThenReducedThenRefused walks the sequence: a refusal for good of the whole dead
// letter sends it reduced, of the reduced one ends dead in the table; a refusal that may pass
// later retries the event; no error is sent.
func TestNextIsWholeThenReducedThenRefused(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		reduced, final bool
		err            error
		want           Step
	}{
		{false, false, nil, Sent},
		{true, false, nil, Sent},
		{false, false, boom, Retry},
		{true, false, boom, Retry},
		{false, true, boom, SendReduced},
		{true, true, boom, Refused},
	}
	for _, c := range cases {
		if got := Next(c.reduced, c.err, c.final); got != c.want {
			t.Errorf("Next(reduced %v, %v, final %v) = %d, want %d", c.reduced, c.err, c.final, got, c.want)
		}
	}
}

// TestReducedMessageKeepsTheIdsOnly: the reduced dead letter drops the payload and headers,
// says how much, and truncates the reason; the whole one is the event's message.
func TestReducedMessageKeepsTheIdsOnly(t *testing.T) {
	e := outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: "42", EventType: "placed",
		Payload: []byte("0123456789"), Headers: map[string]string{"a": "1", "b": "2"}}
	long := strings.Repeat("é", MaxReason)
	whole := Message(context.Background(), e, "why", 3, false)
	if string(whole.Payload) != "0123456789" || whole.Metadata.Get(middleware.ReasonForPoisonedKey) != "why" ||
		whole.Metadata.Get(MetadataAttempts) != "3" || whole.Metadata.Get(middleware.PoisonedTopicKey) != "orders" {
		t.Fatalf("whole dead letter: payload %q, metadata %v", whole.Payload, whole.Metadata)
	}
	reduced := Message(context.Background(), e, long, 3, true)
	reason := reduced.Metadata.Get(middleware.ReasonForPoisonedKey)
	if len(reduced.Payload) != 0 || reduced.Metadata.Get(MetadataPayloadDropped) != "10" ||
		reduced.Metadata.Get(MetadataHeadersDropped) != "2" || len(reason) > MaxReason || !strings.HasPrefix(long, reason) {
		t.Fatalf("reduced dead letter: payload %q, %d-byte reason, metadata %v", reduced.Payload, len(reason), reduced.Metadata)
	}
}
