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
// MESSAGE_TOO_LARGE: not retriable, and only that message of the batch fails.
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
	small, large := keyed("a", []byte("ok")), keyed("b", big)
	err = pub.Publish(testsupport.UniqueName("too_large"), small, large)
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
	if ids := pubErr.FailedUUIDs(); len(ids) != 1 || ids[0] != large.UUID || pubErr.Total != 2 {
		t.Errorf("failed %v of %d, want only %s", ids, pubErr.Total, large.UUID)
	}
	if !strings.Contains(err.Error(), "1 of 2 messages") {
		t.Errorf("error does not say how many failed: %v", err)
	}

	// Above the producer's own limit, Sarama refuses before sending: not retriable either.
	cfg.MessageMaxBytes = 1000
	pub2, err := kafka.NewPublisher(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub2.Close()
	err = pub2.Publish(testsupport.UniqueName("too_large"), keyed("c", make([]byte, 2000)))
	if err == nil || kafka.Retriable(err) {
		t.Errorf("client-side too large: got %v (retriable %v), want a non-retriable error", err, kafka.Retriable(err))
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
