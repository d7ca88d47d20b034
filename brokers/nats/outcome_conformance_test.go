package nats_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/forwarder/outcometest"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

// TestOutcomeConformance runs forwarder/outcometest against an in-process NATS server with
// max_payload 64 KiB (nats.go refuses the oversized message before sending it), with a topic as
// one subject and with 8 key-hash partitions. Refusals besides size: the reserved UUID header set
// to another value, and a metadata entry that cannot be a NATS header.
func TestOutcomeConformance(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{MaxPayload: 64 << 10})
	for _, v := range []struct {
		name       string
		partitions int
	}{{"SubjectPerTopic", 0}, {"Partitions8", 8}} {
		t.Run(v.name, func(t *testing.T) {
			newPublisher := func(t *testing.T) outcometest.Publisher {
				pub, err := nats.NewPublisher(nats.Config{URLs: []string{srv.URL()}, Partitions: v.partitions}, testLogger())
				if err != nil {
					t.Fatalf("new publisher: %v", err)
				}
				return pub
			}
			features := outcometest.Features{OversizedPayload: 100 << 10, Refusals: []outcometest.Refusal{
				{Name: "ReservedUUIDHeader", Spoil: func(msg *message.Message) { msg.Metadata.Set(nats.UUIDHeader, "not-"+msg.UUID) }},
				{Name: "HeaderWithLineBreak", Spoil: func(msg *message.Message) { msg.Metadata.Set("note", "two\r\nlines") }},
			}}
			outcometest.TestOutcomePublisher(t, features, newPublisher, natsBroker(srv.URL()))
		})
	}
}

// natsBroker is the outcometest.Broker of a NATS server: a new topic (its stream is created by
// the first publish), read back from its stream in stream order.
func natsBroker(url string) outcometest.Broker {
	return outcometest.Broker{
		NewTopic: func(*testing.T) string { return "outcometest." + testsupport.UniqueName("t") },
		ReadTopic: func(t *testing.T, topic string) []outcometest.Received {
			t.Helper()
			var got []outcometest.Received
			for _, m := range testsupport.ReadNATSStream(t, url, nats.StreamName(topic)) {
				got = append(got, outcometest.Received{UUID: m.Header.Get(nats.UUIDHeader), Key: m.Header.Get(nats.DefaultKeyMetadata)})
			}
			return got
		},
	}
}
