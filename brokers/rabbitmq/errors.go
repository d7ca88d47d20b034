package rabbitmq

import (
	"context"
	"errors"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

var (
	// ErrPublisherClosed is the outcome of a publish after Close, or of a message Close found
	// without a confirmation. Retriable.
	ErrPublisherClosed = errors.New("rabbitmq: publisher is closed")
	// ErrEarlierMessageFailed is the outcome of a message PublishEach did not send because an
	// earlier message of the same key in the call failed. Retriable.
	ErrEarlierMessageFailed = errors.New("rabbitmq: not sent: an earlier message of the same key failed")
	// ErrInvalidMessage marks a message that cannot be published as it is (nil, a metadata entry
	// whose name is not an AMQP field name, the reserved UUID header with another value).
	// Permanent.
	ErrInvalidMessage = errors.New("rabbitmq: invalid message")
	// ErrMessageTooLarge marks a message whose payload is above Config.MaxMessageSize. Permanent.
	ErrMessageTooLarge = errors.New("rabbitmq: message larger than max_message_size")
	// ErrUnroutable marks a message the broker returned because no queue is bound to its
	// exchange with its routing key (published with the mandatory flag). Permanent: the topic's
	// layout refuses it, and sending it again to the same layout is refused again.
	ErrUnroutable = errors.New("rabbitmq: unroutable: no queue is bound for the routing key")
	// ErrQueueMissing marks a message the broker returned as unroutable while the publisher
	// manages the topology (Config.DisableTopology false): the queue it declared was deleted
	// behind its back. Retriable: the next call declares it again.
	ErrQueueMissing = errors.New("rabbitmq: unroutable: the topic's queue is gone; declared again for the next attempt")
	// ErrNacked marks a message the broker negatively confirmed (basic.nack: it could not take
	// it, for example a full queue with overflow reject-publish). Retriable.
	ErrNacked = errors.New("rabbitmq: the broker refused the message (basic.nack)")
	// ErrConfirmTimeout marks a message without a confirmation within Config.PublishTimeout.
	// Retriable; it may have been stored.
	ErrConfirmTimeout = errors.New("rabbitmq: no publisher confirmation in time")
	// ErrConnection marks a failure to reach or keep the server. Retriable.
	ErrConnection = errors.New("rabbitmq: connection failed")
)

// Retriable reports whether a publish error of this package may succeed when the message is
// sent again. Permanent, blaming the message or its topic: ErrMessageTooLarge, ErrInvalidMessage,
// ErrInvalidTopic, ErrUnroutable (with Config.DisableTopology; a publisher that declares the
// topology itself reports a returned message as ErrQueueMissing, retriable, and declares the
// queue again), and the AMQP reply content-too-large (311). Retriable: timeouts
// and cancelled contexts, a basic.nack, a closed channel or connection (the broker restarting,
// connection-forced 320, a heartbeat timeout, a network error), a closed publisher, messages held
// back behind a failed message of their key, and what an operator fixes, as in brokers/kafka,
// brokers/pulsar and brokers/nats: refused credentials (ErrSASL, ErrCredentials), an unknown or
// forbidden vhost (ErrVhost, access-refused 403), a missing exchange (not-found 404), a queue
// declared with other arguments (precondition-failed 406), resource alarms. Dead-lettering every
// event of a topic for a missing grant would punish innocent events; bounded retry still
// dead-letters them after the forwarder's MaxAttempts. A channel closed by the server because of
// a message above its max_message_size (406 too) fails every message in flight on the channel:
// retriably, except the message the server's reason names by its size, which is
// ErrMessageTooLarge; the publisher then refuses larger messages before sending
// (Config.MaxMessageSize at most the server's refuses them before in the first place).
// Retriable(nil) is false.
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	for _, transient := range []error{ErrEarlierMessageFailed, ErrPublisherClosed, ErrNacked, ErrConfirmTimeout, ErrQueueMissing,
		ErrConnection, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, transient) {
			return true
		}
	}
	for _, permanent := range []error{ErrMessageTooLarge, ErrInvalidMessage, ErrInvalidTopic, ErrUnroutable} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		return amqpErr.Code != amqp.ContentTooLarge
	}
	return true
}

// closeReason is the error a closed channel or connection leaves: the broker's reason, or
// amqp.ErrClosed.
func closeReason(reason *amqp.Error) error {
	if reason == nil {
		return amqp.ErrClosed
	}
	return reason
}

// isClosed reports whether err says the channel or connection is gone.
func isClosed(err error) bool {
	var amqpErr *amqp.Error
	return errors.Is(err, amqp.ErrClosed) || (errors.As(err, &amqpErr) && !amqpErr.Recover) ||
		strings.Contains(err.Error(), "channel/connection is not open")
}
