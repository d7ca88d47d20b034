package forwarder_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/outcometest"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
)

// wavesOnlyPublisher hides every method of a publisher but Publish, Close and Retriable: a plain
// Watermill publisher with a classifier, which the forwarder publishes through the waves.
type wavesOnlyPublisher struct {
	pub message.Publisher
}

func (p wavesOnlyPublisher) Publish(topic string, msgs ...*message.Message) error {
	return p.pub.Publish(topic, msgs...)
}
func (p wavesOnlyPublisher) Close() error             { return p.pub.Close() }
func (p wavesOnlyPublisher) Retriable(err error) bool { return kafka.Retriable(err) }

// TestWavesOutcomeConformance runs forwarder/outcometest against the forwarder's path for a plain
// message.Publisher: forwarder.OutcomePublisherOf, the function New publishes through, which
// wraps it in the waves (internal/waves), over brokers/kafka's Publisher reduced to Publish and
// its classifier on the real Kafka.
func TestWavesOutcomeConformance(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	newPublisher := func(t *testing.T) outcometest.Publisher {
		pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, nil)
		if err != nil {
			t.Fatalf("new kafka publisher: %v", err)
		}
		// The classifier is the plain publisher's own (Config.IsRetriable's default).
		each := forwarder.OutcomePublisherOf(wavesOnlyPublisher{pub}, nil, nil)
		wrapped, ok := each.(outcometest.Publisher)
		if !ok {
			t.Fatalf("OutcomePublisherOf(a plain publisher) = %T, without Close", each)
		}
		return wrapped
	}
	broker := forwardertest.KafkaBroker(brokers, 0)
	features := outcometest.Features{
		OversizedPayload: kafka.DefaultMessageMaxBytes + 1,
		// A wave whose Publish call failed is sent again one message at a time: the innocent
		// messages of the call reach the broker twice.
		DuplicatesOnFailure: true,
		// Publish takes no context, and the waves adapter does not look at ctx between waves.
		SendsAfterCancel: true,
	}
	outcometest.TestOutcomePublisher(t, features, newPublisher, broker)
}
