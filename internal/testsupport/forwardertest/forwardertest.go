// Package forwardertest is what the forwarder's external tests and forwarder/admin's tests
// share to run a relay: test events, a Kafka publisher, a forwarder with quick test timings
// that runs until the test ends, and the parked-keys fixture. It imports the forwarder, so the
// forwarder's internal (package forwarder) tests cannot use it; testdb opens their databases.
package forwardertest

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// Body is the payload of test events: the key and its per-key sequence number.
type Body struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// Event returns event n of key on topic, with a Body payload and a UUIDv7 ID.
func Event(t testing.TB, topic, key string, n int) outbox.Event {
	t.Helper()
	e, err := outbox.NewJSONEvent(topic, "order", key, "OrderChanged", Body{Key: key, N: n})
	if err != nil {
		t.Fatal(err)
	}
	e.ID = uuid.Must(uuid.NewV7())
	return e
}

// KafkaPublisher returns a Kafka publisher to brokers, closed when the test ends.
func KafkaPublisher(t testing.TB, brokers []string) message.Publisher {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// QuietLogger keeps the relays' info logs out of the test output; warnings still show.
func QuietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Config returns a polling relay's config for the events table with quick test timings.
func Config(db *sql.DB, dialect outbox.Dialect, table string, pub message.Publisher) forwarder.Config {
	return forwarder.Config{
		DB: db, Dialect: dialect, Table: table, Publisher: pub,
		LeaseTTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		InitialInterval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond, BatchSize: 200,
		Logger: QuietLogger(),
	}
}

// Start runs a forwarder of cfg until the returned stop function is called (or the test ends);
// stop waits for Run to return and fails the test if Run returned an error.
func Start(t testing.TB, cfg forwarder.Config) (stop func()) {
	t.Helper()
	f, err := forwarder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("forwarder.Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
