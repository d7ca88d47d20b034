package nats_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxkit/outboxkit/brokers/nats"
)

func TestRetriable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("nats: publish message x to t: %w", err) }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{wrap(natsgo.ErrMaxPayload), false},
		{wrap(jetstream.ErrStreamMessageExceedsMaximum), false},
		{wrap(&jetstream.APIError{ErrorCode: 10054, Code: 400, Description: "message size exceeds maximum allowed"}), false},
		// What an operator fixes is retriable, as in brokers/kafka and brokers/pulsar.
		{wrap(&jetstream.APIError{ErrorCode: 10060, Code: 400, Description: "expected stream does not match"}), true},
		{wrap(&jetstream.APIError{ErrorCode: 10074, Code: 500, Description: "replicas > 1 not supported in non-clustered mode"}), true},
		{wrap(nats.ErrStreamMismatch), true},
		{errors.New(`nats: permissions violation for publish to "orders"`), true},
		{wrap(natsgo.ErrBadSubject), false},
		{fmt.Errorf("%w: empty", nats.ErrInvalidTopic), false},
		{wrap(nats.ErrInvalidMessage), false},
		{wrap(jetstream.ErrAsyncPublishTimeout), true},
		{wrap(jetstream.ErrNoStreamResponse), true},
		{wrap(natsgo.ErrNoResponders), true},
		{wrap(natsgo.ErrDisconnected), true},
		{wrap(natsgo.ErrConnectionClosed), true},
		{wrap(natsgo.ErrTimeout), true},
		{wrap(jetstream.ErrStreamNotFound), true},
		{wrap(context.DeadlineExceeded), true},
		{wrap(nats.ErrPublisherClosed), true},
		{wrap(fmt.Errorf("%w (after %w)", nats.ErrEarlierMessageFailed, natsgo.ErrMaxPayload)), true},
	} {
		if got := nats.Retriable(tc.err); got != tc.want {
			t.Errorf("Retriable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
