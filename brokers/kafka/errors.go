package kafka

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// ErrInvalidMessage marks a message that can never be produced as it is (for example one using
// a metadata key reserved by Watermill). Retriable reports false for it.
var ErrInvalidMessage = errors.New("kafka: invalid message")

// ErrPublisherClosed is returned by Publish after Close. Retriable reports true: the message is
// fine, another publisher can send it.
var ErrPublisherClosed = errors.New("kafka: publisher closed")

// MessageError is the failure of one message of a Publish call.
type MessageError struct {
	// UUID is the Watermill message UUID.
	UUID string
	// Err is the cause, usually a sarama.KError or a network error.
	Err error
}

// Error implements error.
func (e MessageError) Error() string { return fmt.Sprintf("message %s: %v", e.UUID, e.Err) }

// Unwrap returns the cause.
func (e MessageError) Unwrap() error { return e.Err }

// PublishError reports the messages of one Publish call that the broker did not acknowledge.
// The others were acknowledged. It unwraps to the first failure (in the order the messages were
// given), so errors.Is(err, sarama.ErrMessageSizeTooLarge) and Retriable look at that one;
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
// true means "the message is fine, try again later" (the broker or the network is not ready:
// unknown topic or partition, leader not available or moved, timeouts, not enough replicas,
// throttling, connection failures, closed client); false means "this message will fail the same
// way every time" (too large, not authorized, invalid record or topic, unsupported version or
// compression, bad client configuration), so it should be dead-lettered at once. Errors it does
// not recognize are retriable: the forwarder's bounded retry still dead-letters them in the end,
// while dead-lettering a transient error at once would lose order for nothing.
//
// A missing topic is retriable on purpose: with auto-creation off, it is usually a topic that an
// operator has not created yet, not a bad event.
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrInvalidMessage) {
		return false
	}
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		retriable, known := kafkaErrorRetriable[kerr]
		if known {
			return retriable
		}
		return true
	}
	var cfgErr sarama.ConfigurationError
	if errors.As(err, &cfgErr) {
		// Sarama reports a message above Producer.MaxMessageBytes, and every bad client
		// setting, as a ConfigurationError: neither goes away by retrying.
		return false
	}
	var encErr sarama.PacketEncodingError
	if errors.As(err, &encErr) {
		return false
	}
	// Everything else is retriable: Sarama's client errors (ErrOutOfBrokers, ErrNotConnected,
	// ErrClosedClient, ErrShuttingDown, ...), ErrPublisherClosed, context deadlines, and network
	// errors (net.Error, io.EOF, ECONNREFUSED, ECONNRESET) are transient by nature, and an
	// unknown error gets the benefit of the doubt (see above).
	return true
}

// kafkaErrorRetriable lists the broker error codes a producer meets, with their class. The
// retriable ones follow Kafka's RetriableException hierarchy.
var kafkaErrorRetriable = map[sarama.KError]bool{
	sarama.ErrUnknownTopicOrPartition:         true,
	sarama.ErrLeaderNotAvailable:              true,
	sarama.ErrNotLeaderForPartition:           true,
	sarama.ErrRequestTimedOut:                 true,
	sarama.ErrBrokerNotAvailable:              true,
	sarama.ErrReplicaNotAvailable:             true,
	sarama.ErrNetworkException:                true,
	sarama.ErrNotEnoughReplicas:               true,
	sarama.ErrNotEnoughReplicasAfterAppend:    true,
	sarama.ErrKafkaStorageError:               true,
	sarama.ErrInvalidMessage:                  true, // CorruptRecordException: a corrupted transfer, retriable in Kafka
	sarama.ErrOffsetsLoadInProgress:           true,
	sarama.ErrConsumerCoordinatorNotAvailable: true,
	sarama.ErrNotCoordinatorForConsumer:       true,
	sarama.ErrFencedLeaderEpoch:               true,
	sarama.ErrUnknownLeaderEpoch:              true,
	sarama.ErrPreferredLeaderNotAvailable:     true,
	sarama.ErrOffsetNotAvailable:              true,
	sarama.ErrThrottlingQuotaExceeded:         true,
	sarama.ErrConcurrentTransactions:          true,
	sarama.ErrRebalanceInProgress:             true,

	sarama.ErrMessageSizeTooLarge:                false,
	sarama.ErrInvalidTopic:                       false,
	sarama.ErrMessageSetSizeTooLarge:             false,
	sarama.ErrInvalidRequiredAcks:                false,
	sarama.ErrTopicAuthorizationFailed:           false,
	sarama.ErrGroupAuthorizationFailed:           false,
	sarama.ErrClusterAuthorizationFailed:         false,
	sarama.ErrTransactionalIDAuthorizationFailed: false,
	sarama.ErrSASLAuthenticationFailed:           false,
	sarama.ErrIllegalSASLState:                   false,
	sarama.ErrUnsupportedSASLMechanism:           false,
	sarama.ErrUnsupportedVersion:                 false,
	sarama.ErrUnsupportedForMessageFormat:        false,
	sarama.ErrUnsupportedCompressionType:         false,
	sarama.ErrPolicyViolation:                    false,
	sarama.ErrInvalidRecord:                      false,
	sarama.ErrInvalidTimestamp:                   false,
	sarama.ErrInvalidRequest:                     false,
	sarama.ErrInvalidConfig:                      false,
	sarama.ErrOutOfOrderSequenceNumber:           false,
	sarama.ErrInvalidProducerEpoch:               false,
	sarama.ErrInvalidProducerIDMapping:           false,
	sarama.ErrTopicDeletionDisabled:              false,
}
