package schema

import (
	"errors"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestConnectReachesTheWrappedPublisher: the decorator around brokers/pulsar's publisher keeps
// its Connect (the relay's start-up check of the broker), and the call reaches that publisher:
// it connects to a topic of the real Pulsar, and once the wrapped publisher is closed it fails
// with the wrapped publisher's own ErrPublisherClosed.
func TestConnectReachesTheWrappedPublisher(t *testing.T) {
	cl, _, topic, _ := registry(t)
	ppub, err := pulsar.NewPublisher(pulsar.PublisherConfig{Config: pulsar.Config{URL: testsupport.PulsarURL(t)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(ppub, enc)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := pub.(connector)
	if !ok {
		t.Fatalf("%T around brokers/pulsar's publisher has no Connect", pub)
	}
	if err := c.Connect(topic); err != nil {
		t.Fatalf("Connect(%q) through the decorator: %v", topic, err)
	}
	if err := ppub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(topic); !errors.Is(err, pulsar.ErrPublisherClosed) {
		t.Fatalf("Connect after the wrapped publisher closed: %v, want its ErrPublisherClosed", err)
	}
}
