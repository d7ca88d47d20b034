package pulsar_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/forwarder/outcometest"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestOutcomeConformance runs forwarder/outcometest against the real Pulsar, twice: with the
// publisher's own size check (MaxMessageSize 64 KiB) refusing the oversized message before
// anything is sent, and with MaxMessageSize above the broker's maxMessageSize (5 MiB), so that
// pulsar-client-go's own check against the broker's limit refuses it inside SendAsync.
func TestOutcomeConformance(t *testing.T) {
	url := testsupport.PulsarURL(t)
	for _, v := range []struct {
		name           string
		maxMessageSize int
		oversized      int
	}{
		{"PublisherSizeCheck", 64 << 10, 100 << 10},
		{"ClientSizeCheck", 16 << 20, 6 << 20},
	} {
		t.Run(v.name, func(t *testing.T) {
			newPublisher := func(t *testing.T) outcometest.Publisher {
				cfg := pulsar.PublisherConfig{Config: pulsar.Config{URL: url}, MaxMessageSize: v.maxMessageSize}
				pub, err := pulsar.NewPublisher(cfg, testLogger())
				if err != nil {
					t.Fatalf("new publisher: %v", err)
				}
				return pub
			}
			features := outcometest.Features{OversizedPayload: v.oversized, Refusals: []outcometest.Refusal{{
				// The property carrying the message UUID is the publisher's: a message setting it
				// to something else is invalid.
				Name:  "ReservedUUIDProperty",
				Spoil: func(msg *message.Message) { msg.Metadata.Set(pulsar.UUIDProperty, "not-"+msg.UUID) },
			}}}
			outcometest.TestOutcomePublisher(t, features, newPublisher, pulsarBroker(url))
		})
	}
}

// pulsarBroker is the outcometest.Broker of the real Pulsar: a new topic name in
// public/default (created by the first producer), read back with a reader from the earliest
// message up to the last one.
func pulsarBroker(url string) outcometest.Broker {
	return outcometest.Broker{
		NewTopic: func(*testing.T) string { return testsupport.UniqueName("outcometest") },
		ReadTopic: func(t *testing.T, topic string) []outcometest.Received {
			return readPulsarTopic(t, url, "persistent://public/default/"+topic)
		},
	}
}

// readPulsarTopic returns every message of topic, in order.
func readPulsarTopic(t *testing.T, url, topic string) []outcometest.Received {
	t.Helper()
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, Logger: pulsar.NewClientLogger(nil)})
	if err != nil {
		t.Fatalf("pulsar client: %v", err)
	}
	defer client.Close()
	reader, err := client.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	if err != nil {
		t.Fatalf("pulsar reader of %s: %v", topic, err)
	}
	defer reader.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []outcometest.Received
	for reader.HasNext() {
		msg, err := reader.Next(ctx)
		if err != nil {
			t.Fatalf("reading %s back after %d messages: %v", topic, len(got), err)
		}
		got = append(got, outcometest.Received{UUID: msg.Properties()[pulsar.UUIDProperty], Key: msg.Key()})
	}
	return got
}
