package admin_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
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

func openDB(t testing.TB, dialect outbox.Dialect) *sql.DB {
	t.Helper()
	switch dialect {
	case outbox.Postgres:
		return testsupport.OpenPostgres(t)
	case outbox.MySQL:
		return testsupport.OpenMySQL(t)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+
		"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec("PRAGMA journal_mode=WAL"); err != nil {
		t.Fatal(err)
	}
	return db
}

func newHarness(t testing.TB, dialect outbox.Dialect, brokers []string) *harness {
	t.Helper()
	db := openDB(t, dialect)
	name := testsupport.UniqueName("adm")
	w, err := outbox.NewWriter(outbox.Config{Dialect: dialect, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, w.Table()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() {
		tbl := w.Table()
		for _, n := range []string{tbl.Events(), tbl.Leases(), tbl.Relays(), tbl.Migrations(), tbl.KeyLocks(), tbl.CDCSlots(),
			tbl.Units(), tbl.Installation()} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
	})
	return &harness{t: t, dialect: dialect, db: db, writer: w, brokers: brokers, topic: testsupport.UniqueName("events")}
}

// body is the payload of test events: the key and its per-key sequence number.
type body struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func (h *harness) event(key string, n int) outbox.Event {
	e, err := outbox.NewJSONEvent(h.topic, "order", key, "OrderChanged", body{Key: key, N: n})
	if err != nil {
		h.t.Fatal(err)
	}
	e.ID = uuid.Must(uuid.NewV7())
	return e
}

// write commits the events in one transaction.
func (h *harness) write(events ...outbox.Event) {
	h.t.Helper()
	ctx := context.Background()
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.writer.WriteTx(ctx, tx, events...); err != nil {
		_ = tx.Rollback()
		h.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) publisher() message.Publisher {
	h.t.Helper()
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: h.brokers}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// quietLogger keeps the relays' info logs out of the test output; warnings still show.
var quietLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// config returns a polling relay's config for the harness with quick test timings.
func (h *harness) config(pub message.Publisher) forwarder.Config {
	return forwarder.Config{
		DB: h.db, Dialect: h.dialect, Table: h.writer.Table().Events(), Publisher: pub,
		LeaseTTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		InitialInterval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond, BatchSize: 200,
		Logger: quietLogger,
	}
}

// start runs a relay until the test ends, and fails the test if Run returned an error.
func (h *harness) start(cfg forwarder.Config) {
	h.t.Helper()
	f, err := forwarder.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("forwarder.Run: %v", err)
		}
	})
}
