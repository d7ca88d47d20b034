package forwarder_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// switchablePublisher refuses every message while down, as an unreachable broker does.
type switchablePublisher struct{ down atomic.Bool }

var errBrokerDown = errors.New("dial tcp 127.0.0.1:9: connection refused")

func (p *switchablePublisher) Publish(string, ...*message.Message) error {
	if p.down.Load() {
		return errBrokerDown
	}
	return nil
}

func (p *switchablePublisher) Close() error { return nil }

// TestPublishStallIsReportedAndItsRecovery: while every delivery fails (the broker down), the
// forwarder says so within PublishStallAfter (and a check): a warning with the last error and
// outboxkit_forwarder_publish_stalled 1; once publishing succeeds again, an info line and the
// gauge back to 0. Before, a Kafka outage of five minutes logged nothing at warn level.
func TestPublishStallIsReportedAndItsRecovery(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		t.Fatal(err)
	}
	pub := &switchablePublisher{}
	pub.down.Store(true)
	var logs logSink
	reg := prometheus.NewRegistry()
	f, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.SQLite, Publisher: pub, Metrics: reg,
		PublishStallAfter: 500 * time.Millisecond, UnlimitedRetries: true, InitialInterval: 20 * time.Millisecond,
		MaxInterval: 50 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	defer func() { stop(); <-done }()

	e, err := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPlaced", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTx(ctx, tx, e); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the stall warning", func() bool {
		return logs.line("level=WARN", "publishing makes no progress", "connection refused") != "" &&
			gaugeValue(t, reg, "outboxkit_forwarder_publish_stalled") == 1
	})
	pub.down.Store(false)
	waitFor(t, 10*time.Second, "the recovery", func() bool {
		return logs.line("level=INFO", "publishing recovered") != "" && gaugeValue(t, reg, "outboxkit_forwarder_publish_stalled") == 0
	})
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
