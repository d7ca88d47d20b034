package forwarder_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestWALKilledBetweenParkingAndConfirming is the second hand-over race of docs/wal.md,
// "Parking": relay A parks p's n=1 (refused) and n=2 (held back behind it) and is stopped before
// it confirms their position. Relay B streams them again. With the session barrier, B's drain
// waits until the stream has passed them: parking them again finds their rows and writes
// nothing. Without it (WAL_TEST_NO_BARRIER=1), B's drain runs first (the hooks make it), publishes
// and deletes n=1 (n=2 is still refused), and the re-streamed n=1 is written again behind n=2.
func TestWALKilledBetweenParkingAndConfirming(t *testing.T) {
	noBarrier := os.Getenv("WAL_TEST_NO_BARRIER") == "1"
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")

	pubA := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	parkedA, release := make(chan struct{}, 1), make(chan struct{})
	a, err := forwarder.New(forwarder.WithWALHooks(h.walConfig(pubA), &wal.Hooks{Parked: func() {
		parkedA <- struct{}{}
		<-release
	}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	h.waitForWALStream(slot)
	e1, e2 := h.event("p", 1), h.event("p", 2)
	for _, e := range []string{e1.ID.String(), e2.ID.String()} {
		pubA.poison(e, errors.New("refused"))
	}
	h.write(e1, e2)
	<-parkedA
	kill() // stopped after parking, before the batch counts as done: nothing past it is confirmed
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := h.parkedRowsByKey()["p"]; got != 2 {
		t.Fatalf("relay A parked %d rows of p, want 2", got)
	}
	if _, err := h.db.Exec("UPDATE " + h.writer.Table().Events() + " SET next_attempt_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}

	pubB := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	pubB.poison(e2.ID.String(), errors.New("still refused"))
	drained, restreamed, waiting := make(chan struct{}, 64), make(chan struct{}, 64), make(chan struct{}, 1)
	hooks := &wal.Hooks{NoBarrier: noBarrier,
		BarrierWait: func() { waiting <- struct{}{} },
		Drained: func(n int) {
			if n > 0 {
				drained <- struct{}{}
			}
		},
		Batch: func(n int) {
			if n >= 2 {
				restreamed <- struct{}{}
			}
		},
		Streaming: func() {
			select { // the drain first, unless the barrier holds it
			case <-drained:
				drained <- struct{}{}
			case <-waiting:
			}
		},
	}
	h.start(forwarder.WithWALHooks(h.walConfig(pubB), hooks))
	<-restreamed
	<-drained
	ids := h.parkedEventIDs("p")
	if len(ids) != 1 || ids[0] != e2.ID.String() {
		t.Fatalf("rows of p in the table after the re-stream: %v; want only n=2 (%s): n=1 (%s) must not be parked twice",
			ids, e2.ID, e1.ID)
	}
	t.Logf("the re-streamed events of p were not parked again (barrier on: %v)", !noBarrier)
}

// parkedEventIDs lists the event ids of key's pending and dead rows, in seq order.
func (h *harness) parkedEventIDs(key string) []string {
	h.t.Helper()
	rows, err := h.db.Query("SELECT event_id::text FROM "+h.writer.Table().Events()+" WHERE status IN (0, 2) AND aggregate_id = $1 ORDER BY seq", key)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}
