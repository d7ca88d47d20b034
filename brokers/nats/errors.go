package nats

import (
	"context"
	"errors"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	// ErrPublisherClosed is the outcome of a publish after Close, or of a message Close found
	// without an acknowledgement. Retriable.
	ErrPublisherClosed = errors.New("nats: publisher is closed")
	// ErrEarlierMessageFailed is the outcome of a message PublishEach did not send because an
	// earlier message of the same key in the call failed. Retriable.
	ErrEarlierMessageFailed = errors.New("nats: not sent: an earlier message of the same key failed")
	// ErrInvalidMessage marks a message that cannot be published as it is (nil, a metadata entry
	// that cannot be a NATS header, a reserved header with another value). Permanent.
	ErrInvalidMessage = errors.New("nats: invalid message")
	// ErrStreamMismatch marks a topic whose stream exists with other subjects than this
	// configuration needs (Config.Partitions changed, or two topics map to one stream name).
	// Retriable: an operator fixes the stream, the same message then succeeds.
	ErrStreamMismatch = errors.New("nats: stream does not hold the topic's subjects")
)

// permanentCodes are the JetStream API error codes that blame the message, which sending it
// again cannot change: larger than the stream's max_msg_size.
var permanentCodes = map[jetstream.ErrorCode]bool{
	jetstream.JSErrCodeStreamMessageExceedsMaximum: true,
}

// Retriable reports whether a publish error of this package may succeed when the message is
// sent again. Permanent, blaming the message or its topic: a message above the server's
// max_payload (nats.ErrMaxPayload) or the stream's max_msg_size, a bad subject (ErrInvalidTopic,
// nats.ErrBadSubject), an invalid message (ErrInvalidMessage, nats.ErrBadHeaderMsg). Retriable:
// timeouts (no acknowledgement within PublishTimeout, context deadlines), "no responders" (no
// stream answered yet, for example while it is being created or recovered), connection loss and
// reconnection, a closed publisher, a missing stream, the messages failed only because an earlier
// message of their key did, and what an operator fixes, as in brokers/kafka and brokers/pulsar: a
// permissions violation, a stream that exists with other subjects (ErrStreamMismatch) or captures
// the subject under another name, a stream configuration the server refuses (replicas above 1 on
// a single server). Dead-lettering every event of a topic for a missing grant would punish
// innocent events; bounded retry still dead-letters them after the forwarder's MaxAttempts.
// Retriable(nil) is false.
//
// The forwarder dead-letters an event at once on a permanent error, and after its last attempt
// on a retriable one.
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	for _, transient := range []error{ErrEarlierMessageFailed, ErrPublisherClosed, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, transient) {
			return true
		}
	}
	for _, permanent := range []error{ErrInvalidTopic, ErrInvalidMessage, natsgo.ErrMaxPayload,
		natsgo.ErrBadSubject, natsgo.ErrBadHeaderMsg, natsgo.ErrInvalidMsg, jetstream.ErrStreamMessageExceedsMaximum} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return !permanentCodes[apiErr.ErrorCode]
	}
	return true
}
