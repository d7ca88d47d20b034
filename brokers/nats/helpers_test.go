package nats_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

// testLogger prints errors and info.
func testLogger() watermill.LoggerAdapter { return watermill.NewStdLogger(false, false) }

// startServer starts an in-process NATS server with JetStream for t.
func startServer(t *testing.T, o natsserver.Options) *natsserver.Server {
	t.Helper()
	return natsserver.Start(t, o)
}

func newPublisher(t *testing.T, cfg nats.Config) *nats.Publisher {
	t.Helper()
	pub, err := nats.NewPublisher(cfg, testLogger())
	if err != nil {
		t.Fatalf("new publisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

func newSubscriber(t *testing.T, cfg nats.Config) *nats.Subscriber {
	t.Helper()
	sub, err := nats.NewSubscriber(cfg, testLogger())
	if err != nil {
		t.Fatalf("new subscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}
