package kafka_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

func TestRetriableTable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{sarama.ErrUnknownTopicOrPartition, true},
		{sarama.ErrLeaderNotAvailable, true},
		{sarama.ErrNotLeaderForPartition, true},
		{sarama.ErrRequestTimedOut, true},
		{sarama.ErrNotEnoughReplicas, true},
		{sarama.ErrOutOfBrokers, true},
		{&netTimeout{}, true},
		{kafka.ErrPublisherClosed, true},
		{errors.New("something unknown"), true},
		{sarama.ErrMessageSizeTooLarge, false},
		{sarama.ErrTopicAuthorizationFailed, false},
		{sarama.ErrClusterAuthorizationFailed, false},
		{sarama.ErrInvalidRecord, false},
		{sarama.ErrSASLAuthenticationFailed, false},
		{sarama.ConfigurationError("Attempt to produce message larger than configured Producer.MaxMessageBytes"), false},
		{kafka.ErrInvalidMessage, false},
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
		wrapped := &kafka.PublishError{Topic: "t", Total: 2, Failed: []kafka.MessageError{{UUID: "u", Err: c.err}}}
		if got := kafka.Retriable(fmt.Errorf("relay: %w", wrapped)); got != c.want {
			t.Errorf("Retriable(wrapped %v) = %v, want %v", c.err, got, c.want)
		}
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
	if !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		t.Errorf("want MESSAGE_TOO_LARGE from the broker, got %v", err)
	}
	if kafka.Retriable(err) {
		t.Errorf("Retriable(%v) = true, want false", err)
	}
	if ids := pubErr.FailedUUIDs(); len(ids) != 1 || ids[0] != large.UUID {
		t.Errorf("failed %v, want %s", ids, large.UUID)
	}
}

// With message_max_bytes at or below the broker's limit (the default), Sarama refuses an
// oversized message before sending and never builds a batch the broker would reject whole, so
// only that message fails and the others of the same Publish, same key included, are acknowledged.
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
	if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) || !kafka.Retriable(err) {
		t.Fatalf("want a retriable UNKNOWN_TOPIC_OR_PARTITION, got %v (retriable %v)", err, kafka.Retriable(err))
	}
}

// A user without WRITE on the topic gets an authorization failure: not retriable.
func TestAuthorizationFailureIsNotRetriable(t *testing.T) {
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
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) || kafka.Retriable(err) {
		t.Fatalf("want a non-retriable TOPIC_AUTHORIZATION_FAILED, got %v (retriable %v)", err, kafka.Retriable(err))
	}
	if strings.Contains(err.Error(), "reader-password") {
		t.Errorf("the error shows the password: %v", err)
	}
}
