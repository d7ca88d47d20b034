package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
)

func TestRetriable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("rabbitmq: publish message x to t: %w", err) }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{wrap(rabbitmq.ErrMessageTooLarge), false},
		{wrap(rabbitmq.ErrInvalidMessage), false},
		{fmt.Errorf("%w: empty", rabbitmq.ErrInvalidTopic), false},
		{wrap(rabbitmq.ErrUnroutable), false},
		{wrap(&amqp.Error{Code: amqp.ContentTooLarge, Reason: "CONTENT_TOO_LARGE"}), false},
		// Connection, operator and broker faults are retriable.
		{wrap(&amqp.Error{Code: amqp.ConnectionForced, Reason: "CONNECTION_FORCED - broker forced connection closure"}), true},
		{wrap(&amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no exchange 'x' in vhost '/'"}), true},
		{wrap(&amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED"}), true},
		{wrap(&amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - inequivalent arg"}), true},
		{wrap(amqp.ErrClosed), true},
		{wrap(amqp.ErrCredentials), true},
		{wrap(amqp.ErrVhost), true},
		{wrap(rabbitmq.ErrNacked), true},
		{wrap(rabbitmq.ErrQueueMissing), true},
		{wrap(rabbitmq.ErrConfirmTimeout), true},
		{wrap(rabbitmq.ErrConnection), true},
		{wrap(rabbitmq.ErrPublisherClosed), true},
		{wrap(context.DeadlineExceeded), true},
		{wrap(fmt.Errorf("%w (after %w)", rabbitmq.ErrEarlierMessageFailed, rabbitmq.ErrUnroutable)), true},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true},
	} {
		if got := rabbitmq.Retriable(tc.err); got != tc.want {
			t.Errorf("Retriable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
