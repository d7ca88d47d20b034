package kafka_test

import (
	"crypto/rand"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder/outcometest"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
)

// TestOutcomeConformance runs forwarder/outcometest against the real Kafka. The whole suite
// runs with the publisher's own size check refusing the oversized message before anything is
// produced. TestRefusedFailsAlone runs once more on topics whose max.message.bytes (32 KiB) is
// below the publisher's MessageMaxBytes, so that the broker refuses a whole batch for the
// oversized message (64 KiB) and the publisher must find out which message is at fault (it
// sends the refused ones again, alone): a known deviation today, see below.
func TestOutcomeConformance(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	newPublisher := func(t *testing.T) outcometest.Publisher {
		pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, nil)
		if err != nil {
			t.Fatalf("new publisher: %v", err)
		}
		return pub
	}
	t.Run("PublisherSizeCheck", func(t *testing.T) {
		outcometest.TestOutcomePublisher(t, outcometest.Features{OversizedPayload: kafka.DefaultMessageMaxBytes + 1},
			newPublisher, forwardertest.KafkaBroker(brokers, 0))
	})
	t.Run("BrokerRefusal", func(t *testing.T) {
		refusal := outcometest.Refusal{
			Name: "OversizedForTheTopic",
			Spoil: func(msg *message.Message) {
				msg.Payload = make([]byte, 64<<10)
				_, _ = rand.Read(msg.Payload) // incompressible
			},
		}
		outcometest.TestRefusedFailsAlone(t, outcometest.TestContext{
			Features:     outcometest.Features{Refusals: []outcometest.Refusal{refusal}},
			NewPublisher: newPublisher,
			Broker:       forwardertest.KafkaBroker(brokers, 32<<10),
		})
	})
}
