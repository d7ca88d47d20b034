package admin_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
	"github.com/outboxkit/outboxkit/internal/testsupport/testdb"
	"github.com/outboxkit/outboxkit/outbox"
)

// harness is one real database with a fresh outbox table, to write the events an Admin lists
// and acts on, and (for the tests that need one) a relay to a real Kafka cluster.
type harness struct {
	t       testing.TB
	dialect outbox.Dialect
	db      *sql.DB
	writer  *outbox.Writer
	brokers []string
	topic   string
}

func newHarness(t testing.TB, dialect outbox.Dialect, brokers []string) *harness {
	t.Helper()
	db := testdb.Open(t, dialect)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: dialect, Table: testsupport.UniqueName("adm")})
	return &harness{t: t, dialect: dialect, db: db, writer: w, brokers: brokers, topic: testsupport.UniqueName("events")}
}

func (h *harness) event(key string, n int) outbox.Event {
	return forwardertest.Event(h.t, h.topic, key, n)
}

// write commits the events in one transaction.
func (h *harness) write(events ...outbox.Event) {
	h.t.Helper()
	if err := testsupport.WriteEvents(context.Background(), h.db, h.writer, events...); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) publisher() message.Publisher {
	return forwardertest.KafkaPublisher(h.t, h.brokers)
}

// config returns a polling relay's config for the harness with quick test timings.
func (h *harness) config(pub message.Publisher) forwarder.Config {
	return forwardertest.Config(h.db, h.dialect, h.writer.Table().Events(), pub)
}

// start runs a relay until the test ends, and fails the test if Run returned an error.
func (h *harness) start(cfg forwarder.Config) {
	h.t.Helper()
	forwardertest.Start(h.t, cfg)
}
