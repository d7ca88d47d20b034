package forwarder

import (
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// cdcTakeoverFixture: relay A streamed with every lease of the group, read its leases (aLeases)
// and the rows (recs, all pending and unmarked); then its leases expired and relay B took every
// partition over (each epoch incremented).
type cdcTakeoverFixture struct {
	*storeFixture
	aLeases []relay.Lease
	recs    []relay.Record
}

func newCDCTakeoverFixture(t *testing.T) *cdcTakeoverFixture {
	fx := newStoreFixture(t, outbox.Postgres)
	if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
		t.Fatal(err)
	}
	const ttl = time.Minute // A's leases expire by the UPDATE below, not by waiting
	if n := fx.heartbeat("A", ttl); n != outbox.Partitions {
		t.Fatalf("A owns %d partitions", n)
	}
	aLeases := fx.leases("A")
	fx.write("k1", 10, 10)
	fx.write("k2", 10)
	recs := fx.claim(10, 1<<20)
	if len(recs) != 3 {
		t.Fatalf("claimed %d rows, want 3", len(recs))
	}
	// A stalls: its heartbeat and its leases expire.
	for _, q := range []string{"UPDATE " + fx.store.Table.Leases() + " SET expires_at = now() - interval '1 minute' WHERE owner = 'A'",
		"UPDATE " + fx.store.Table.Relays() + " SET heartbeat_at = now() - interval '1 minute' WHERE owner = 'A'"} {
		if _, err := fx.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if n := fx.heartbeat("B", ttl); n != outbox.Partitions {
		t.Fatalf("B took %d partitions over, want all %d", n, outbox.Partitions)
	}
	return &cdcTakeoverFixture{storeFixture: fx, aLeases: aLeases, recs: recs}
}

// marked counts the rows given a next attempt time (left to the retry path).
func (fx *storeFixture) marked() int {
	fx.t.Helper()
	var n int
	if err := fx.db.QueryRow("SELECT COUNT(*) FROM " + fx.store.Table.Events() + " WHERE next_attempt_at IS NOT NULL").Scan(&n); err != nil {
		fx.t.Fatal(err)
	}
	return n
}

// TestCDCMarkRetryIsFenced: a streamer whose leases were taken over cannot leave rows to the
// retry path: the new streamer may be publishing them, and its retry path would publish them
// again (a duplicate a read_committed consumer sees, in exactly-once mode). The marks are fenced
// like the acknowledgement; the new owner's marks go through. (The streamer's own path is
// forwarder/internal/cdc's TestStreamerWithLostLeasesMarksNothing.)
func TestCDCMarkRetryIsFenced(t *testing.T) {
	fx := newCDCTakeoverFixture(t)
	n, owned, err := fx.store.MarkRetry(fx.ctx, fx.db, "A", fx.aLeases, fx.recs)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || fx.marked() != 0 {
		t.Fatalf("relay A, whose leases B took over, marked %d rows for the retry path (%d marked in the table)", n, fx.marked())
	}
	if len(owned) != 0 {
		t.Fatalf("relay A, whose leases B took over, was told it owns partitions %v", owned)
	}
	n, owned, err = fx.store.MarkRetry(fx.ctx, fx.db, "B", fx.leases("B"), fx.recs)
	if err != nil || n != int64(len(fx.recs)) || fx.marked() != len(fx.recs) || len(owned) != outbox.Partitions {
		t.Fatalf("relay B, the owner, marked %d of %d rows (%d in the table), owning %d partitions: %v",
			n, len(fx.recs), fx.marked(), len(owned), err)
	}
}
