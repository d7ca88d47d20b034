package kafka_test

import (
	"crypto/sha1"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
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
	if os.Getenv("OUTBOXKIT_KAFKA_FULL_SUITE") != "" {
		tests.TestPubSub(t, features, constructor, newPubSub)
		return
	}
	// By default, every test of the suite except the three that make many members join one
	// consumer group one after another (watermill-kafka opens a group member per Subscribe
	// call): each join is a rebalance, and on a loaded 2-core machine those tests sometimes
	// exceed the suite's fixed 45 s read timeout. OUTBOXKIT_KAFKA_FULL_SUITE=1 runs them too.
	suite := []func(*testing.T, tests.TestContext, tests.PubSubConstructor){
		tests.TestPublishSubscribe, tests.TestResendOnError, tests.TestNoAck, tests.TestConcurrentClose,
		tests.TestContinueAfterErrors, tests.TestPublishSubscribeInOrder, tests.TestPublisherClose, tests.TestTopic,
		tests.TestMessageCtx, tests.TestSubscribeCtx, tests.TestNewSubscriberReceivesOldMessages,
	}
	for _, fn := range suite {
		name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
		t.Run(name[strings.LastIndex(name, ".")+1:], func(t *testing.T) {
			t.Parallel()
			fn(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, constructor)
		})
	}
	t.Run("TestConsumerGroups", func(t *testing.T) {
		t.Parallel()
		tests.TestConsumerGroups(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, newPubSub)
	})
}
