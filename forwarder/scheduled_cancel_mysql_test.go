package forwarder_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// A business transaction that cancels an event the relay has released (or an ordinary pending
// one) and then stays open does not hold the relay up on MySQL/MariaDB (docs/scheduled.md,
// cancellation): the relay publishes and acknowledges that event and every other one, renews
// its leases and publishes nothing twice while the transaction is open for twice the lease TTL.
func TestCancelHeldOpenDoesNotStallTheRelayMySQL(t *testing.T) {
	h := newHarness(t, outbox.MySQL, testsupport.KafkaBrokers(t))
	ctx := context.Background()
	cfg := h.config(h.publisher())

	released := h.event("pay", 0)
	h.write(released)
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := h.scheduler().Cancel(ctx, wsql.TxFromStdSQL(tx), released.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Released, []uuid.UUID{released.ID}) {
		t.Fatalf("cancel of a pending event: %+v, want it Released", res)
	}
	opened := time.Now()

	keys := keysNamed("other", 8)
	writeRound := func(n int) {
		var events []outbox.Event
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
		h.write(events...)
	}
	writeRound(0)
	h.start(cfg)
	h.waitForOwners(1)
	epochs := h.leaseEpochs()

	// While the cancel's transaction stays open for twice the lease TTL, the other keys keep
	// being written; each round must arrive while it is still open.
	rounds := 1
	for ; time.Since(opened) < 2*cfg.LeaseTTL || rounds < 3; rounds++ {
		writeRound(rounds)
		want := 1 + len(keys)*(rounds+1)
		got := consumeDistinct(t, h.brokers, h.topic, want, 30*time.Second) // a bound against a hang
		if n := len(distinct(got)); n < want {
			t.Fatalf("with the cancel's transaction open for %s, %d of %d events arrived", time.Since(opened).Round(time.Millisecond), n, want)
		}
	}
	if held := time.Since(opened); held < 2*cfg.LeaseTTL {
		t.Fatalf("the transaction was open for %s, want at least %s", held, 2*cfg.LeaseTTL)
	}
	if after := h.leaseEpochs(); !maps.Equal(epochs, after) {
		t.Fatalf("lease epochs changed while the cancel's transaction was open: %v, then %v (a lease was lost)", epochs, after)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	want := 1 + len(keys)*rounds
	got := consumeDistinct(t, h.brokers, h.topic, want, 30*time.Second)
	if dups := len(got) - len(distinct(got)); dups != 0 || len(distinct(got)) != want {
		t.Fatalf("%d records, %d distinct events, want %d each (no duplicate)", len(got), len(distinct(got)), want)
	}
	checkDelivery(t, got, keys, rounds)
}

// distinct returns the event ids of got, once each.
func distinct(got []received) map[string]bool {
	ids := map[string]bool{}
	for _, r := range got {
		ids[r.eventID] = true
	}
	return ids
}

// leaseEpochs returns each partition's owner and epoch.
func (h *harness) leaseEpochs() map[int]string {
	h.t.Helper()
	rows, err := h.db.Query("SELECT partition_no, COALESCE(owner, ''), epoch FROM " + h.writer.Table().Leases())
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var p int
		var owner string
		var epoch int64
		if err := rows.Scan(&p, &owner, &epoch); err != nil {
			h.t.Fatal(err)
		}
		out[p] = fmt.Sprintf("%s@%d", owner, epoch)
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}
