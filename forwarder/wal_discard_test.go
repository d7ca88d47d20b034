package forwarder_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestWALDiscardHoldsAcrossARestream: an operator's discard is not undone by a relay that
// streams the discarded event again. Relay A parks d's n=1 (refused) and n=2 behind it and is
// stopped before it confirms their position; n=1 goes dead, and the operator discards it with
// the admin API. Relay B streams n=1 and n=2 again (the broker still refuses n=1): parking n=1
// again must write nothing (its tombstone, schema v13), so no dead row of it comes back to hold
// the key, and n=2 is published from the table without waiting for an operator.
func TestWALDiscardHoldsAcrossARestream(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	ctx := context.Background()

	pubA := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	parkedA, release := make(chan struct{}, 1), make(chan struct{})
	a, err := forwarder.New(forwarder.WithWALHooks(h.walConfig(pubA), &wal.Hooks{Parked: func() {
		parkedA <- struct{}{}
		<-release
	}}))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, kill := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	h.waitForWALStream(slot)
	poison, later := h.event("d", 1), h.event("d", 2)
	pubA.poison(poison.ID.String(), errors.New("refused"))
	h.write(poison, later)
	<-parkedA
	kill() // stopped after parking, before the batch counts as done: nothing past it is confirmed
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ids := h.parkedEventIDs("d"); len(ids) != 2 {
		t.Fatalf("relay A parked %v of d, want 2 rows", ids)
	}
	// Its retries ran out (the retry policy's outcome, set here), then the operator discards it.
	if _, err := h.db.Exec("UPDATE "+h.writer.Table().Events()+" SET status = 2, last_error = 'refused' WHERE event_id = $1", poison.ID); err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(h.db, h.dialect, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := adm.Discard(ctx, poison.ID); err != nil || n != 1 {
		t.Fatalf("discard %s: %d, %v; want 1 discarded", poison.ID, n, err)
	}

	pubB := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	pubB.poison(poison.ID.String(), errors.New("still refused"))
	restreamed := make(chan struct{}, 64)
	h.start(forwarder.WithWALHooks(h.walConfig(pubB), &wal.Hooks{Batch: func(n int) {
		if n >= 2 {
			restreamed <- struct{}{}
		}
	}}))
	<-restreamed
	if ids := h.parkedEventIDs("d"); slices.Contains(ids, poison.ID.String()) {
		t.Fatalf("rows of d after the re-stream: %v; the discarded n=1 (%s) was parked again", ids, poison.ID)
	}
	got := consumeDistinct(t, h.brokers, h.topic, 1, time.Minute)
	if len(got) != 1 || got[0].eventID != later.ID.String() {
		t.Fatalf("consumed %+v; want only n=2 (%s)", got, later.ID)
	}
	waitFor(t, time.Minute, "the table emptied", func() bool { return len(h.parkedRowsByKey()) == 0 })
}
