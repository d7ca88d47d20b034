package kafka_test

import (
	"crypto/sha1"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestUniversalPubSub runs Watermill's universal Pub/Sub suite against the real Kafka, with
// honest features: consumer groups yes; exactly-once no (at-least-once); guaranteed order no
// (Kafka orders per partition, i.e. per key, and the suite's messages carry no key);
// persistent yes; a new subscriber receives old messages only without a consumer group, which
// the suite does not use. ForceShort keeps message counts small: 2 shared cores.
//
// The publisher is franz-go's, the subscriber watermill-kafka's (Sarama). (When the publisher
// was Sarama's, with Sarama 1.43.3 the tests that make many members join one group failed about
// one run in three here, "out of order sequence number" on fresh topics; Sarama 1.61.1 fixed it.)
func TestUniversalPubSub(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	if testing.Short() {
		t.Skip("the universal suite takes about a minute")
	}
	features := tests.Features{
		ConsumerGroups:                   true,
		ExactlyOnceDelivery:              false,
		GuaranteedOrder:                  false,
		Persistent:                       true,
		NewSubscriberReceivesOldMessages: false, // true only without a consumer group
		ForceShort:                       true,
	}
	newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		cfg := kafka.Config{
			Brokers:         brokers,
			ConsumerGroup:   group,
			TopicPartitions: 4,
			NackResendSleep: 10 * time.Millisecond,
		}
		pub, err := kafka.NewPublisher(cfg, watermill.NopLogger{})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := kafka.NewSubscriber(cfg, watermill.NopLogger{})
		if err != nil {
			t.Fatal(err)
		}
		return pub, sub
	}
	// One consumer group per test (t is the suite's subtest, shared by the subscribers it
	// multiplies) and per run: a group shared by the parallel tests of the suite would rebalance
	// across all their topics at every join.
	run := testsupport.UniqueName("suite")
	constructor := func(t *testing.T) (message.Publisher, message.Subscriber) {
		return newPubSub(t, run+"_"+fmt.Sprintf("%x", sha1.Sum([]byte(t.Name()))))
	}
	tests.TestPubSub(t, features, constructor, newPubSub)
}
