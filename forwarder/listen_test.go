package forwarder_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestListenerWaitsOnlyAfterWritersThatDidNotNotify: a writer that inserted while no relay
// waited does not notify, and its row can commit below the highest seq (max(seq), which the
// listener watches, does not change). The listener starts waiting only once that writer has
// ended, and wakes the forwarder then: the row is relayed within a minute (a bound against a
// hang), not at the next poll an hour later.
func TestListenerWaitsOnlyAfterWritersThatDidNotNotify(t *testing.T) {
	h := newHarness(t, outbox.Postgres, kfakeBrokers(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = open.Rollback() }()
	if err := h.writer.WriteTx(ctx, open, h.event("open-writer", 0)); err != nil {
		t.Fatal(err)
	}
	h.write(h.event("committed-writer", 0)) // a higher seq, committed and relayed first
	first := h.config(h.publisher())
	first.Retention = time.Hour // the relayed row stays: max(seq) does not change when the open writer commits
	stopFirst := h.start(first)
	deadline := time.Now().Add(2 * time.Minute) // bounds against a hang
	for h.rowsWithStatus(1) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the committed event was not relayed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopFirst()

	cfg := h.config(h.publisher())
	cfg.RelayID, cfg.Workers, cfg.Retention = "listening-relay", 1, time.Hour
	cfg.MinPollInterval, cfg.MaxPollInterval = time.Hour, time.Hour
	cfg.Wakeups = forwarder.ListenPostgres(ctx, testsupport.PostgresDSN(t), h.writer.Table(), nil)
	h.start(cfg)
	for h.ownedBy()[cfg.RelayID] < outbox.Partitions {
		if time.Now().After(deadline.Add(2 * time.Minute)) {
			t.Fatalf("the listening relay owns %d partitions", h.ownedBy()[cfg.RelayID])
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // the first claim found nothing; the listener cannot wait while the open writer is open
	start := time.Now()
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	const bound = time.Minute // far below the poll interval: only a wake-up relays the row this soon
	for h.rowsWithStatus(0) > 0 && time.Since(start) < bound {
		time.Sleep(5 * time.Millisecond)
	}
	if h.rowsWithStatus(0) != 0 {
		t.Fatalf("the event of a writer that did not notify was still pending %v after its commit: the listener waited before it ended", bound)
	}
	t.Logf("commit-to-ack of the writer that did not notify: %v", time.Since(start))
	if got := consume(t, h.brokers, h.topic, 2, time.Minute); len(got) != 2 {
		t.Fatalf("%d messages delivered, want 2", len(got))
	}
}

// TestEveryListenerIsWoken: of two relays' listeners on one table only one can hold the wake-up
// lock and wait; the writers' notifications reach both, and the other watches, so a commit wakes
// both (within the watch's bound; the test's minute only bounds a hang: nothing else wakes a
// listener, and one that connects after the commit wakes on connecting).
func TestEveryListenerIsWoken(t *testing.T) {
	h := newHarness(t, outbox.Postgres, kfakeBrokers(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listeners := []<-chan struct{}{
		forwarder.ListenPostgres(ctx, testsupport.PostgresDSN(t), h.writer.Table(), nil),
		forwarder.ListenPostgres(ctx, testsupport.PostgresDSN(t), h.writer.Table(), nil),
	}
	for round := range 3 {
		time.Sleep(500 * time.Millisecond) // both are idle: one waits, the other watches, backed off
		for _, l := range listeners {
			select {
			case <-l:
			default:
			}
		}
		h.write(h.event("wake-both", round))
		for i, l := range listeners {
			select {
			case <-l:
			case <-time.After(time.Minute):
				t.Fatalf("round %d: listener %d was not woken within a minute of a commit", round, i)
			}
		}
	}
}
