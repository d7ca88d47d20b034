package kafka_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

func TestRetriableTable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		// Transient broker states and client-side limits.
		{kerr.UnknownTopicOrPartition, true},
		{kerr.LeaderNotAvailable, true},
		{kerr.NotLeaderForPartition, true},
		{kerr.RequestTimedOut, true},
		{kerr.NotEnoughReplicas, true},
		{kerr.ThrottlingQuotaExceeded, true},
		{kerr.CorruptMessage, true},
		{kgo.ErrRecordTimeout, true},
		{kgo.ErrRecordRetries, true},
		{kgo.ErrClientClosed, true},
		{context.DeadlineExceeded, true},
		{context.Canceled, true},
		{&netTimeout{}, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{kafka.ErrPublisherClosed, true},
		{kafka.ErrEarlierMessageFailed, true},
		{errors.New("something unknown"), true},
		// Producer state: never the event's fault.
		{kerr.OutOfOrderSequenceNumber, true},
		{kerr.InvalidProducerEpoch, true},
		{kerr.UnknownProducerID, true},
		{kerr.InvalidProducerIDMapping, true},
		// Authorization, authentication, configuration: an operator fixes them, the event is fine.
		{kerr.TopicAuthorizationFailed, true},
		{kerr.ClusterAuthorizationFailed, true},
		{kerr.TransactionalIDAuthorizationFailed, true},
		{kerr.SaslAuthenticationFailed, true},
		{kerr.UnsupportedSaslMechanism, true},
		{kerr.UnsupportedCompressionType, true},
		// The message itself.
		{kerr.MessageTooLarge, false},
		{kerr.RecordListTooLarge, false},
		{kerr.InvalidRecord, false},
		{kerr.InvalidTopicException, false},
		{kafka.ErrInvalidMessage, false},
		// Sarama's errors (the subscriber's client) by the same codes.
		{sarama.ErrUnknownTopicOrPartition, true},
		{sarama.ErrOutOfBrokers, true},
		{sarama.ErrOutOfOrderSequenceNumber, true},
		{sarama.ErrTopicAuthorizationFailed, true},
		{sarama.ErrSASLAuthenticationFailed, true},
		{sarama.ErrMessageSizeTooLarge, false},
		{sarama.ErrInvalidRecord, false},
		{sarama.ConfigurationError("Attempt to produce message larger than configured Producer.MaxMessageBytes"), false},
		{nil, false},
	}
	for _, c := range cases {
		if got := kafka.Retriable(c.err); got != c.want {
			t.Errorf("Retriable(%v) = %v, want %v", c.err, got, c.want)
		}
		if c.err == nil {
			continue
		}
		// Classification survives wrapping, as in a PublishError.
		wrapped := &kafka.PublishError{Topic: "t", Total: 2, Failed: []kafka.MessageError{{UUID: "u", Err: fmt.Errorf("kafka: message u: %w", c.err)}}}
		if got := kafka.Retriable(fmt.Errorf("relay: %w", wrapped)); got != c.want {
			t.Errorf("Retriable(wrapped %v) = %v, want %v", c.err, got, c.want)
		}
	}
	// A message held back behind its key's permanent failure is retriable: it is innocent.
	held := fmt.Errorf("%w: message b, after message a failed (%v)", kafka.ErrEarlierMessageFailed, kerr.MessageTooLarge)
	if !kafka.Retriable(held) || errors.Is(held, kerr.MessageTooLarge) {
		t.Errorf("a held-back message must be retriable and not carry the earlier cause: %v", held)
	}
}

type netTimeout struct{}

func (*netTimeout) Error() string   { return "i/o timeout" }
func (*netTimeout) Timeout() bool   { return true }
func (*netTimeout) Temporary() bool { return true }

func keyed(key string, payload []byte) *message.Message {
	m := message.NewMessage(watermill.NewUUID(), payload)
	m.Metadata.Set(kafka.DefaultKeyMetadata, key)
	return m
}

// A message above the real broker's message.max.bytes (1048588) is refused by the broker with
// MESSAGE_TOO_LARGE: not retriable.
func TestTooLargeMessageIsNotRetriable(t *testing.T) {
	cfg := kafka.Config{
		Brokers:         testsupport.KafkaBrokers(t),
		MessageMaxBytes: 4 << 20, // let it past the client-side check so the broker decides
		Compression:     kafka.CompressionNone,
	}
	pub, err := kafka.NewPublisher(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	big := make([]byte, 1200*1024)
	_, _ = rand.Read(big)
	large := keyed("b", big)
	err = pub.Publish(testsupport.UniqueName("too_large"), large)
	var pubErr *kafka.PublishError
	if !errors.As(err, &pubErr) {
		t.Fatalf("want a *PublishError, got %v", err)
	}
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("want MESSAGE_TOO_LARGE from the broker, got %v", err)
	}
	if kafka.Retriable(err) {
		t.Errorf("Retriable(%v) = true, want false", err)
	}
	if ids := pubErr.FailedUUIDs(); len(ids) != 1 || ids[0] != large.UUID {
		t.Errorf("failed %v, want %s", ids, large.UUID)
	}
}

// With message_max_bytes at or below the broker's limit (the default), the publisher refuses an
// oversized message before sending and never builds a batch the broker would reject whole, so
// only that message fails and the others of the same Publish, including the earlier one of its
// key, are acknowledged.
func TestTooLargeMessageFailsAlone(t *testing.T) {
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: testsupport.KafkaBrokers(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	big := make([]byte, 1100*1024)
	_, _ = rand.Read(big)
	before, large, after := keyed("k", []byte("ok")), keyed("k", big), keyed("other", []byte("ok"))
	err = pub.Publish(testsupport.UniqueName("too_large"), before, large, after)
	var pubErr *kafka.PublishError
	if !errors.As(err, &pubErr) {
		t.Fatalf("want a *PublishError, got %v", err)
	}
	if ids := pubErr.FailedUUIDs(); len(ids) != 1 || ids[0] != large.UUID || pubErr.Total != 3 {
		t.Errorf("failed %v of %d, want only %s", ids, pubErr.Total, large.UUID)
	}
	if kafka.Retriable(err) {
		t.Errorf("Retriable(%v) = true, want false", err)
	}
	if !strings.Contains(err.Error(), "1 of 3 messages") {
		t.Errorf("error does not say how many failed: %v", err)
	}
}

// A topic that does not exist (auto-creation off) is retriable: it may be created later.
func TestUnknownTopicIsRetriable(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	pub, err := kafka.NewPublisher(kafka.Config{
		Brokers: cluster.ListenAddrs(), Version: "2.3.0", ProducerRetries: 1, RetryBackoff: time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	err = pub.Publish("never_created", keyed("a", []byte("x")))
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || !kafka.Retriable(err) {
		t.Fatalf("want a retriable UNKNOWN_TOPIC_OR_PARTITION, got %v (retriable %v)", err, kafka.Retriable(err))
	}
}

// A user without WRITE on the topic gets an authorization failure: retriable, since granting the
// ACL makes the same event succeed (dead-lettering it would punish an innocent event).
func TestAuthorizationFailureIsRetriable(t *testing.T) {
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.SeedTopics(1, "guarded"),
		kfake.User("PLAIN", "reader", "reader-password",
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "guarded", Pattern: kmsg.ACLResourcePatternTypeLiteral,
				Operation: kmsg.ACLOperationDescribe, Allow: true},
			kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral,
				Operation: kmsg.ACLOperationIdempotentWrite, Allow: true},
		),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	pub, err := kafka.NewPublisher(kafka.Config{
		Brokers: cluster.ListenAddrs(), Version: "2.3.0",
		SASL: kafka.SASLConfig{Mechanism: kafka.SASLPlain, Username: "reader", Password: "reader-password"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	err = pub.Publish("guarded", keyed("a", []byte("x")))
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !kafka.Retriable(err) {
		t.Fatalf("want a retriable TOPIC_AUTHORIZATION_FAILED, got %v (retriable %v)", err, kafka.Retriable(err))
	}
	if strings.Contains(err.Error(), "reader-password") {
		t.Errorf("the error shows the password: %v", err)
	}
}
