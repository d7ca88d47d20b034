package forwarder_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSQLiteSecondRelayWaits: SQLite supports one relay per database. A second forwarder on the
// same database relays nothing and says why while the first runs, and takes over once it stops.
func TestSQLiteSecondRelayWaits(t *testing.T) {
	h := newHarness(t, outbox.SQLite, kfakeBrokers(t))
	first := h.config(h.publisher())
	first.RelayID = "relay-first"
	stopFirst := h.start(first)
	h.waitForOwners(1)

	var logs syncBuffer
	second := h.config(h.publisher())
	second.RelayID = "relay-second"
	reg := prometheus.NewRegistry()
	second.Metrics = reg
	second.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h.start(second)

	keys := keysNamed("s", 20)
	var events []outbox.Event
	for _, k := range keys {
		events = append(events, h.event(k, 0))
	}
	h.write(events...)
	got := consume(t, h.brokers, h.topic, len(keys), 2*time.Minute)
	checkDelivery(t, got, keys, 1)
	if n := testsupport.CounterSum(t, reg, "outboxkit_forwarder_relayed_total"); n != 0 {
		t.Fatalf("the second relay on one SQLite database relayed %v events beside the first", n)
	}
	deadline := time.Now().Add(2 * time.Minute) // bounds against a hang
	for !strings.Contains(logs.String(), `another relay runs on this SQLite database`) {
		if time.Now().After(deadline) {
			t.Fatalf("the waiting relay did not say why; its log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "other_relay=relay-first") {
		t.Fatalf("the waiting relay does not name the running one:\n%s", logs.String())
	}

	stopFirst()
	var more []outbox.Event
	for _, k := range keys {
		more = append(more, h.event(k, 1))
	}
	h.write(more...)
	got = consume(t, h.brokers, h.topic, 2*len(keys), 2*time.Minute)
	checkDelivery(t, got, keys, 2)
	// The counter moves once the acknowledgement committed, just after the broker has the events.
	deadline = time.Now().Add(2 * time.Minute)
	for testsupport.CounterSum(t, reg, "outboxkit_forwarder_relayed_total") < float64(len(keys)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := testsupport.CounterSum(t, reg, "outboxkit_forwarder_relayed_total"); n != float64(len(keys)) {
		t.Fatalf("after the first relay stopped, the second relayed %v events, want %d", n, len(keys))
	}
}

// TestRunReturnsNilWhenStoppedWhileStarting: Run returns nil once its context is cancelled,
// also while it is still starting (here: waiting for the SQLite database's other relay), as it
// does when stopped while relaying.
func TestRunReturnsNilWhenStoppedWhileStarting(t *testing.T) {
	h := newHarness(t, outbox.SQLite, kfakeBrokers(t))
	first := h.config(h.publisher())
	first.RelayID = "relay-first"
	h.start(first)
	h.waitForOwners(1)

	var logs syncBuffer
	second := h.config(h.publisher())
	second.RelayID = "relay-second"
	second.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f, err := forwarder.New(second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(logs.String(), "another relay runs on this SQLite database"); {
		if time.Now().After(deadline) {
			t.Fatalf("the second relay did not start waiting; its log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run stopped while starting returned %v, want nil", err)
		}
	case <-time.After(2 * time.Minute): // a bound against a hang
		t.Fatal("Run did not return within 2 minutes of its context's cancellation")
	}
}

// TestRunReportsAnUnreachableDatabaseWhenStoppedWhileWaitingForIt: a Run whose context ends while
// it still waits for a database it could not reach returns the database's error: "never
// started" is not "stopped as asked". The server here refuses the first connection and never
// answers the later ones, so the context always ends inside an attempt, after a database error:
// the error must be that one, not the attempt's "context deadline exceeded".
func TestRunReportsAnUnreachableDatabaseWhenStoppedWhileWaitingForIt(t *testing.T) {
	addr := unansweringServer(t)
	db, err := sql.Open("pgx", "postgres://outboxkit@"+addr+"/outboxkit?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := forwarder.New(forwarder.Config{DB: db, Dialect: outbox.Postgres, Table: "outbox_events",
		Publisher: gochannel.NewGoChannel(gochannel.Config{}, nil), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err = f.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "the database was not ready") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Run on an unreachable database until its deadline returned %v, want the database's error", err)
	}
}

// unansweringServer listens on loopback, closes the first connection at once and holds every
// later one open without a word, and returns its address.
func unansweringServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for first := true; ; first = false {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if first {
				conn.Close()
				continue
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}
