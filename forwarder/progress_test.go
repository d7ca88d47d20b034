package forwarder_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
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
	pub := &switchablePublisher{}
	pub.down.Store(true)
	f, reg, logs, write := newStallForwarder(t, pub)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	defer func() { stop(); <-done }()
	write()
	waitFor(t, 2*time.Minute, "the stall warning", func() bool {
		return logs.line("level=WARN", "publishing makes no progress", "connection refused") != "" &&
			gaugeValue(t, reg, "outboxkit_forwarder_publish_stalled") == 1
	})
	pub.down.Store(false)
	waitFor(t, 2*time.Minute, "the recovery", func() bool {
		return logs.line("level=INFO", "publishing recovered") != "" && gaugeValue(t, reg, "outboxkit_forwarder_publish_stalled") == 0
	})
}

// hangingPublisher neither succeeds nor fails while down: its Publish returns only once the
// broker is back, as franz-go's does for records it may have sent when the broker died.
type hangingPublisher struct {
	down    atomic.Bool
	once    sync.Once
	release chan struct{}
}

func (p *hangingPublisher) Publish(string, ...*message.Message) error {
	if p.down.Load() {
		<-p.release
	}
	return nil
}

// up brings the broker back: hanging calls return, later ones succeed.
func (p *hangingPublisher) up() {
	p.down.Store(false)
	p.once.Do(func() { close(p.release) })
}

func (p *hangingPublisher) Close() error { return nil }

// TestPublishStallIsReportedWhileAPublishHangs: a delivery that neither succeeds nor fails (the
// broker died with a request in flight) for PublishStallAfter is a stall too: the warning and
// the gauge come while the call still hangs, and the recovery once it returns. Before, only a
// failed delivery started the stall clock, so a Kafka outage could pass with no warning.
func TestPublishStallIsReportedWhileAPublishHangs(t *testing.T) {
	pub := &hangingPublisher{release: make(chan struct{})}
	pub.down.Store(true)
	f, reg, logs, write := newStallForwarder(t, pub)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	defer func() { pub.up(); stop(); <-done }()
	write()
	waitFor(t, 2*time.Minute, "the stall warning while the publish hangs", func() bool {
		return logs.line("level=WARN", "publishing makes no progress") != "" &&
			gaugeValue(t, reg, "outboxkit_forwarder_publish_stalled") == 1
	})
	pub.up()
	waitFor(t, 2*time.Minute, "the recovery", func() bool {
		return logs.line("level=INFO", "publishing recovered") != "" && gaugeValue(t, reg, "outboxkit_forwarder_publish_stalled") == 0
	})
}

// newStallForwarder returns a forwarder over a new SQLite outbox publishing to pub with
// PublishStallAfter 500ms, its metrics and logs, and a function writing one event.
func newStallForwarder(t *testing.T, pub message.Publisher) (*forwarder.Forwarder, *prometheus.Registry, *logSink, func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	reg := prometheus.NewRegistry()
	f, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.SQLite, Publisher: pub, Metrics: reg,
		PublishStallAfter: 500 * time.Millisecond, UnlimitedRetries: true, InitialInterval: 20 * time.Millisecond,
		MaxInterval: 50 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	write := func() {
		t.Helper()
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
	}
	return f, reg, logs, write
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
