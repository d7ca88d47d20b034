package forwarder

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// setTimes sets the created_at and deliver_at (zero: NULL) of the row of event id.
func (fx *storeFixture) setTimes(id uuid.UUID, created, deliverAt time.Time) {
	fx.t.Helper()
	d := fx.store.Dialect
	var deliver any
	if !deliverAt.IsZero() {
		deliver = d.TimeArg(deliverAt)
	}
	q := d.Rebind("UPDATE " + fx.writer.Table().Events() + " SET created_at = ?, deliver_at = ? WHERE event_id = ?")
	if _, err := fx.db.ExecContext(fx.ctx, q, d.TimeArg(created), deliver, id.String()); err != nil {
		fx.t.Fatal(err)
	}
}

// The age of the oldest pending event (the oldest_pending_age_seconds gauge, outboxkit status,
// the admin API's backlog) and of the oldest blocked key (oldest_blocked_key_age_seconds) count
// from the moment an event became due: a scheduled event written an hour ago and released now
// has waited since its deliver_at, not for an hour, or each long-scheduled event coming due
// would look like a stalled relay. An event whose deliver_at was already past when it was
// written waits since its write.
// (Polling's release, which the wal source's drain runs too, on the three databases; the cdc
// source's release, which writes the row again, on PostgreSQL.)
func TestStoreOldestPendingAgesAReleasedRowFromItsDueTime(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		fx.checkDueAges(func() {
			if err := fx.store.ReleaseDue(fx.ctx, fx.db, allPartitions(), 100); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("cdc", func(t *testing.T) {
		fx := newStoreFixture(t, outbox.Postgres)
		fx.checkDueAges(func() {
			if n := fx.releaseByWrite(); n != 2 {
				t.Fatalf("the cdc release released %d rows, want 2", n)
			}
		})
	})
}

// checkDueAges writes an event scheduled an hour ago and due a second ago, one written 20 s ago
// for two days ago, and an ordinary one written 10 s ago, releases the two due ones with
// release, and checks the ages.
func (fx *storeFixture) checkDueAges(release func()) {
	t := fx.t
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	released := fx.writeAt("released", now.Add(time.Hour))
	pastAtWrite := fx.writeAt("past", now.Add(-48*time.Hour))
	ordinary := fx.writeAt("ordinary", time.Time{})
	fx.setTimes(released, now.Add(-time.Hour), now.Add(-time.Second))
	fx.setTimes(pastAtWrite, now.Add(-20*time.Second), now.Add(-48*time.Hour))
	fx.setTimes(ordinary, now.Add(-10*time.Second), time.Time{})
	release()
	want := now.Add(-20 * time.Second) // the written-for-the-past event, due since its write

	stats, err := fx.store.Stats(fx.ctx, fx.db)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].Pending != 3 || !stats[0].Oldest.Equal(want) {
		t.Fatalf("stats: %+v; want 3 pending, the oldest due at %s (20 s ago), not the released event's created_at %s",
			stats, want, now.Add(-time.Hour))
	}
	topics, err := fx.adm.Status(fx.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 1 || topics[0].Pending != 3 || !topics[0].OldestPending.Equal(want) {
		t.Fatalf("admin status: %+v; want 3 pending, the oldest due at %s (20 s ago)", topics, want)
	}

	// The released event fails: its key is blocked since (at most) its due time.
	var seq int64
	for _, r := range fx.claim(100, 1<<20) {
		if r.Event.ID == released {
			seq = r.Seq
		}
	}
	if seq == 0 {
		t.Fatalf("the released event %s was not claimed", released)
	}
	if err := fx.store.Fail(fx.ctx, fx.db, seq, 1, now.Add(time.Hour), false, "refused"); err != nil {
		t.Fatal(err)
	}
	_, oldest, err := relay.BlockedSummary(fx.ctx, fx.db, fx.store.SQL())
	if err != nil {
		t.Fatal(err)
	}
	if due := now.Add(-time.Second); !oldest.Equal(due) {
		t.Fatalf("oldest blocked head: %s; want its due time %s, not its created_at %s", oldest, due, now.Add(-time.Hour))
	}
}
