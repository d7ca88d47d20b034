package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrInvalidMessage marks a message that can never be produced as it is (for example one using
// a metadata key reserved by Watermill). Retriable reports false for it.
var ErrInvalidMessage = errors.New("kafka: invalid message")

// ErrEarlierMessageFailed marks a message of a Publish or PublishEach call that was not sent (or
// must be sent again) because an earlier message of the same key in the call failed: sending it
// would have put the key out of order. The message itself is fine: Retriable reports true
// whatever the earlier failure was.
var ErrEarlierMessageFailed = errors.New("kafka: not sent because an earlier message of its key failed")

// ErrPublisherClosed is returned by Publish after Close. Retriable reports true: the message is
// fine, another publisher can send it.
var ErrPublisherClosed = errors.New("kafka: publisher closed")

// MessageError is the failure of one message of a Publish call.
type MessageError struct {
	// UUID is the Watermill message UUID.
	UUID string
	// Err is the cause: a *kerr.Error from the broker or the client (kerr.MessageTooLarge for a
	// message above Config.MessageMaxBytes), a franz-go or context error, ErrInvalidMessage or
	// ErrEarlierMessageFailed.
	Err error
}

// Error implements error.
func (e MessageError) Error() string { return fmt.Sprintf("message %s: %v", e.UUID, e.Err) }

// Unwrap returns the cause.
func (e MessageError) Unwrap() error { return e.Err }

// PublishError reports the messages of one Publish call that the broker did not acknowledge.
// The others were acknowledged. It unwraps to the first failure (in the order the messages were
// given), so errors.Is(err, kerr.MessageTooLarge) and Retriable look at that one;
// Failed lists them all for callers that settle messages one by one.
type PublishError struct {
	Topic  string
	Total  int
	Failed []MessageError
}

// Error implements error.
func (e *PublishError) Error() string {
	return fmt.Sprintf("kafka: %d of %d messages to topic %q were not acknowledged, first: %v",
		len(e.Failed), e.Total, e.Topic, e.Failed[0])
}

// Unwrap returns the first failure.
func (e *PublishError) Unwrap() error { return e.Failed[0] }

// FailedUUIDs returns the UUIDs of the messages that were not acknowledged.
func (e *PublishError) FailedUUIDs() []string {
	ids := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		ids[i] = f.UUID
	}
	return ids
}

// Retriable classifies a publish or broker error, in one place, as the forwarder needs it:
// false means "this message will fail the same way every time, wherever it is sent from", so it
// should be dead-lettered at once; true means "the message is fine, try again later". Only an
// error that blames the message itself is permanent:
//
//   - MESSAGE_TOO_LARGE (from the broker, or from the publisher's own size check against
//     Config.MessageMaxBytes), RECORD_LIST_TOO_LARGE, INVALID_RECORD, INVALID_TOPIC_EXCEPTION (the
//     event's topic name is invalid), POLICY_VIOLATION, and ErrInvalidMessage.
//
// Everything else is retriable, on purpose also what an operator must fix, since dead-lettering
// would punish innocent events for it:
//
//   - producer-state errors (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
//     UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED): the producer's
//     sequence state broke, not the message; a later attempt starts a fresh sequence;
//   - authorization and authentication failures (TOPIC_, CLUSTER_, GROUP_ and
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE,
//     UNSUPPORTED_SASL_MECHANISM) and client or broker configuration errors
//     (UNSUPPORTED_VERSION, UNSUPPORTED_COMPRESSION_TYPE, INVALID_REQUIRED_ACKS, INVALID_CONFIG,
//     ...): fixing the ACL or the configuration makes the same message succeed;
//   - transient broker states (UNKNOWN_TOPIC_OR_PARTITION, a topic an operator has not created
//     yet, LEADER_NOT_AVAILABLE, NOT_LEADER_FOR_PARTITION, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS,
//     throttling, ...), franz-go's kgo.ErrRecordTimeout, kgo.ErrRecordRetries,
//     kgo.ErrClientClosed, kgo.ErrMaxBuffered, context deadlines and cancellations, network
//     errors, ErrPublisherClosed and ErrEarlierMessageFailed.
//
// Errors it does not recognize are retriable: the forwarder's bounded retry still dead-letters
// them in the end, while dead-lettering a transient error at once would lose order for nothing.
// Sarama's errors (the subscriber's) are classified by the same broker error codes.
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	// ErrEarlierMessageFailed never wraps the earlier failure, so it cannot be mistaken for it;
	// checked first all the same.
	if errors.Is(err, ErrEarlierMessageFailed) || errors.Is(err, ErrRefusedInTransaction) {
		return true
	}
	if errors.Is(err, ErrInvalidMessage) {
		return false
	}
	for _, transient := range []error{
		ErrPublisherClosed, context.Canceled, context.DeadlineExceeded,
		kgo.ErrRecordTimeout, kgo.ErrRecordRetries, kgo.ErrClientClosed, kgo.ErrMaxBuffered,
	} {
		if errors.Is(err, transient) {
			return true
		}
	}
	var kgoErr *kerr.Error
	if errors.As(err, &kgoErr) {
		return !permanentErrorCodes[kgoErr.Code]
	}
	var saramaErr sarama.KError
	if errors.As(err, &saramaErr) {
		return !permanentErrorCodes[int16(saramaErr)]
	}
	var cfgErr sarama.ConfigurationError
	if errors.As(err, &cfgErr) {
		// Sarama (the subscriber's client) reports bad client settings, and a message above
		// its own size limit, as a ConfigurationError: retrying does not change them.
		return false
	}
	var encErr sarama.PacketEncodingError
	if errors.As(err, &encErr) {
		return false
	}
	// Network errors (net.Error, io.EOF, ECONNREFUSED, ECONNRESET), Sarama's client errors
	// (ErrOutOfBrokers, ErrNotConnected, ...) and unknown errors: transient, or given the
	// benefit of the doubt (see above).
	return true
}

// permanentErrorCodes are the Kafka error codes that blame the message itself; every other code
// is retriable (see Retriable). Keyed by code, so franz-go's *kerr.Error and Sarama's KError
// share it.
var permanentErrorCodes = map[int16]bool{
	kerr.MessageTooLarge.Code:       true, // the record (or its batch) is above message.max.bytes
	kerr.RecordListTooLarge.Code:    true, // the record list is above the segment size
	kerr.InvalidRecord.Code:         true, // the broker's record validation refused it
	kerr.InvalidTopicException.Code: true, // the event's topic name is not a valid topic
	kerr.PolicyViolation.Code:       true, // a broker policy refuses it
}
