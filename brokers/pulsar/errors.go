package pulsar

import (
	"context"
	"errors"
	"strings"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// ErrInvalidTopic marks a topic name the publisher cannot map to a Pulsar topic
// (Config.FullTopicName refused it). Retriable reports false for it.
var ErrInvalidTopic = errors.New("pulsar: invalid topic name")

// permanentResults are the pulsar-client-go result codes that blame the message or its topic,
// which sending the same message again cannot change: too big, invalid, not matching its schema,
// a bad topic name, a terminated topic. What an operator fixes (refused authentication or
// authorization, the client's configuration) is retriable, as in brokers/kafka: the same message
// succeeds once the permission or the setting is right, and dead-lettering every event of a topic
// for a missing grant would punish innocent events. Bounded retry still dead-letters them after
// MaxAttempts, unless UnlimitedRetries.
var permanentResults = map[apulsar.Result]bool{
	apulsar.MessageTooBig:    true,
	apulsar.InvalidMessage:   true,
	apulsar.SchemaFailure:    true,
	apulsar.InvalidTopicName: true,
	apulsar.TopicTerminated:  true,
}

// permanentServerErrors are the names of the broker's answers (pulsar-client-go passes some of
// them on as plain text, for example when it creates a producer) that mean the same as
// permanentResults.
var permanentServerErrors = []string{
	"InvalidTopicName", "TopicTerminatedError", "Invalid topic name", "Invalid short topic name", "Invalid topic domain",
}

// Retriable reports whether a publish error of this package may succeed when the message is
// sent again. Permanent: a message too big for the broker (pulsar.ErrMessageTooLarge, the
// broker's MessageTooBig), an invalid message (a nil message, the UUID property overwritten), a
// schema failure, a bad topic name (ErrInvalidTopic, InvalidTopicName) and a terminated topic.
// Everything else is retriable: a refused authentication or authorization and the client's
// configuration (an operator fixes them; see permanentResults), connection failures,
// timeouts, a full producer queue, a busy producer, a topic not found (it may be being created),
// a closed publisher, and the messages failed only because an earlier message of their key did
// (ErrEarlierMessageFailed, ErrAcknowledgedAfterFailure), and a schema the broker refused
// (ErrSchemaRefused: the topic's registered schema or its policy is for an operator to fix).
// Retriable(nil) is false.
//
// The forwarder dead-letters an event at once on a permanent error, and after its last attempt
// on a retriable one.
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	// Not the message's own failure: checked first, whatever the earlier failure was.
	for _, transient := range []error{ErrEarlierMessageFailed, ErrAcknowledgedAfterFailure, ErrPublisherClosed, ErrSchemaRefused,
		context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, transient) {
			return true
		}
	}
	if errors.Is(err, ErrInvalidTopic) {
		return false
	}
	var pe *apulsar.Error
	if errors.As(err, &pe) {
		return !permanentResults[pe.Result()]
	}
	text := err.Error()
	for _, name := range permanentServerErrors {
		if strings.Contains(text, name) {
			return false
		}
	}
	return true
}

// Retriable classifies the publisher's errors (see the package function Retriable). The
// forwarder uses it when its Config.IsRetriable is not set (forwarder.ErrorClassifier).
func (p *Publisher) Retriable(err error) bool { return Retriable(err) }
