package forwarder

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// The store's side of scheduled events (docs/scheduled.md) on the three databases: the claim
// takes only released events, the release takes only due ones, and a cancel and a release of
// one row never both succeed, whichever of the two transactions holds the row first.

// writeAt commits one event of key, scheduled at at (zero: an ordinary event), and returns its id.
func (fx *storeFixture) writeAt(key string, at time.Time) uuid.UUID {
	fx.t.Helper()
	e := outbox.Event{Topic: "t", AggregateType: "order", AggregateID: key, EventType: "Happened", Payload: []byte(key), DeliverAt: at}
	tx, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		fx.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	events := []outbox.Event{e}
	if err := fx.writer.WriteTx(fx.ctx, tx, events...); err != nil {
		fx.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		fx.t.Fatal(err)
	}
	return events[0].ID
}

func (fx *storeFixture) releaseAndClaim() []uuid.UUID {
	fx.t.Helper()
	if err := fx.store.ReleaseDue(fx.ctx, fx.db, allPartitions(), 100); err != nil {
		fx.t.Fatal(err)
	}
	var ids []uuid.UUID
	for _, r := range fx.claim(100, 1<<20) {
		ids = append(ids, r.Event.ID)
	}
	return ids
}

// A scheduled event not yet due is never claimed and holds nothing back: the ordinary events of
// its key, written before and after it, are claimed; a due one is claimed in sequence order.
func TestStoreClaimsOnlyDueScheduledEvents(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		before := fx.writeAt("k", time.Time{})
		future := fx.writeAt("k", time.Now().Add(time.Hour))
		due := fx.writeAt("k", time.Now().Add(-time.Minute))
		after := fx.writeAt("k", time.Time{})
		if got, want := fx.releaseAndClaim(), []uuid.UUID{before, due, after}; !slices.Equal(got, want) {
			t.Fatalf("claimed %v, want %v (the ordinary events and the due one in sequence order, not %s)", got, want, future)
		}
		if e, err := fx.adm.Event(fx.ctx, future); err != nil || e.State != admin.StateScheduled {
			t.Fatalf("the Admin reports the scheduled event %s as %q (%v), want %q", future, e.State, err, admin.StateScheduled)
		}
	})
}

// cancelTx begins a business transaction and cancels id in it, leaving it open.
func (fx *storeFixture) cancelTx(id uuid.UUID) (*sql.Tx, outbox.ScheduleResult) {
	fx.t.Helper()
	tx, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(func() { _ = tx.Rollback() })
	res, err := fx.writer.Cancel(fx.ctx, wsql.TxFromStdSQL(tx), id)
	if err != nil {
		fx.t.Fatal(err)
	}
	return tx, res
}

// The cancel holds the row first: the relay's release, run while the cancel's transaction is
// open, skips the row; once the cancel commits, the event is gone and never claimed. (SQLite
// serializes writers on the database lock: there the release waits for the cancel's commit.)
func TestStoreCancelHeldWhileRelayReleases(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		id := fx.writeAt("k", time.Now().Add(-time.Minute))
		tx, res := fx.cancelTx(id)
		if !slices.Equal(res.Changed, []uuid.UUID{id}) {
			t.Fatalf("cancel: %+v, want %s cancelled", res, id)
		}
		if fx.store.Dialect != outbox.SQLite {
			if got := fx.releaseAndClaim(); len(got) != 0 {
				t.Fatalf("while the cancel is open the relay claimed %v, want nothing", got)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := fx.releaseAndClaim(); len(got) != 0 {
			t.Fatalf("after the cancel committed the relay claimed %v, want nothing", got)
		}
	})
}

// The release holds the row first: a cancel run while the release's transaction is open waits
// for it, then finds the event released and leaves it; the event is claimed.
func TestStoreReleaseHeldWhileCancelRuns(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			fx := newStoreFixture(t, d)
			id := fx.writeAt("k", time.Now().Add(-time.Minute))
			release, err := fx.db.BeginTx(fx.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = release.Rollback() }()
			if n, err := fx.store.ReleaseDueIn(fx.ctx, release, allPartitions(), 100); err != nil || n != 1 {
				t.Fatalf("release in an open transaction: %d rows, %v; want 1", n, err)
			}
			type result struct {
				res outbox.ScheduleResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(fx.ctx, time.Minute)
				defer cancel()
				tx, err := fx.db.BeginTx(ctx, nil)
				if err != nil {
					done <- result{err: err}
					return
				}
				res, err := fx.writer.Cancel(ctx, wsql.TxFromStdSQL(tx), id)
				if err == nil {
					err = tx.Commit()
				} else {
					_ = tx.Rollback()
				}
				done <- result{res, err}
			}()
			if err := release.Commit(); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.res.Changed) != 0 || !slices.Equal(r.res.Released, []uuid.UUID{id}) {
				t.Fatalf("cancel after the release: %+v, want %s released, nothing cancelled", r.res, id)
			}
			if got := fx.releaseAndClaim(); !slices.Equal(got, []uuid.UUID{id}) {
				t.Fatalf("claimed %v, want the released event %s", got, id)
			}
		})
	}
}

// The release (the polling source's and the cdc source's) and the next-due look-up find their rows
// by an index range on deliver_at, not by reading every scheduled row: with a million events
// scheduled for later, a volatile clock_timestamp() in the condition (which PostgreSQL keeps out
// of index conditions) made each polling step take a second (BenchmarkClaimBesideScheduled).
func TestStoreReleaseUsesTheDeliverAtRange(t *testing.T) {
	fx := newStoreFixture(t, outbox.Postgres)
	for name, q := range map[string]sqlstore.Query{
		"release":     fx.store.SQL().ReleaseDue(allPartitions(), 100),
		"next due":    fx.store.SQL().NextDue(allPartitions(), time.Second),
		"cdc release": fx.store.SQL().CDC().ReleaseDue(100),
	} {
		var plan []string
		err := relay.InTx(fx.ctx, fx.db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(fx.ctx, "SET LOCAL enable_seqscan = off"); err != nil {
				return err
			}
			rows, err := tx.QueryContext(fx.ctx, "EXPLAIN "+q.SQL, q.Args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					return err
				}
				plan = append(plan, line)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(plan, func(line string) bool {
			return strings.Contains(line, "Index Cond") && strings.Contains(line, "deliver_at <=")
		}) {
			t.Errorf("the %s's plan has no index condition on deliver_at (%d lines):\n%s", name, len(plan), strings.Join(plan, "\n"))
		}
	}
}

// NextDue reports how long until the earliest scheduled event of the partitions comes due, by
// the database's clock, and nothing beyond the horizon.
func TestStoreNextDue(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		if _, ok, err := fx.store.NextDue(fx.ctx, fx.db, allPartitions(), time.Minute); err != nil || ok {
			t.Fatalf("empty table: ok %v, %v; want nothing due", ok, err)
		}
		fx.writeAt("k", time.Now().Add(30*time.Second))
		fx.writeAt("k", time.Now().Add(time.Hour))
		due, ok, err := fx.store.NextDue(fx.ctx, fx.db, allPartitions(), time.Minute)
		if err != nil || !ok || due <= 20*time.Second || due > 31*time.Second {
			t.Fatalf("NextDue = %s, %v, %v; want the event due in about 30 s", due, ok, err)
		}
		if _, ok, err := fx.store.NextDue(fx.ctx, fx.db, allPartitions(), 10*time.Second); err != nil || ok {
			t.Fatalf("within 10 s: ok %v, %v; want nothing (the earliest is 30 s away)", ok, err)
		}
	})
}

// A released scheduled event is an ordinary pending event: it waits behind an earlier failing
// event of its key (the key is parked), goes out once that one is retried, and when it fails
// itself it is retried and dead-lettered like any other; a cancel then reports it Released.
func TestStoreReleasedEventRetriesAndWaitsBehindItsParkedKey(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		failing := fx.writeAt("k", time.Time{})
		scheduled := fx.writeAt("k", time.Now().Add(-time.Minute))
		first := fx.claim(10, 1<<20)
		if len(first) != 1 || first[0].Event.ID != failing {
			t.Fatalf("first claim %v, want only the ordinary event %s (the scheduled one not released yet)", first, failing)
		}
		fail := func(seq int64, attempts int, next time.Time, dead bool) {
			fx.ackTx(func(tx *sql.Tx) error { return fx.store.Fail(fx.ctx, tx, seq, attempts, next, dead, "boom") })
		}
		fail(first[0].Seq, 1, time.Now().Add(time.Hour), false)
		if got := fx.releaseAndClaim(); len(got) != 0 {
			t.Fatalf("claimed %v while the key's earlier event is parked, want nothing", got)
		}
		fail(first[0].Seq, 2, time.Now().Add(-time.Second), false) // its retry is due
		got := fx.claim(10, 1<<20)
		if len(got) != 2 || !slices.Equal([]uuid.UUID{got[0].Event.ID, got[1].Event.ID}, []uuid.UUID{failing, scheduled}) {
			t.Fatalf("claimed %v, want the retried event then the released one", got)
		}
		fx.ackTx(func(tx *sql.Tx) error { return fx.store.Ack(fx.ctx, tx, []int64{got[0].Seq}, false) })
		fail(got[1].Seq, 3, time.Now(), true)
		tx, res := fx.cancelTx(scheduled)
		_ = tx.Rollback()
		if !slices.Equal(res.Released, []uuid.UUID{scheduled}) {
			t.Fatalf("cancel of the dead-lettered scheduled event: %+v, want it Released", res)
		}
	})
}

// On MySQL/MariaDB an open release transaction holds up no writer: a scheduled event inserted
// among the due rows it has locked commits at once. The release's locking read took gap locks
// under REPEATABLE READ, where such an insert waited for the release, and the release's update
// deadlocked with other workers' releases and claims (Error 1213 in relaybench -only scheduled
// on MariaDB). The bound is a hang bound: the insert either goes through at once or waits for
// the release, which this test holds open until the insert returned.
func TestStoreOpenReleaseHoldsUpNoWriter(t *testing.T) {
	fx := newStoreFixture(t, outbox.MySQL)
	now := time.Now()
	fx.writeAt("a", now.Add(-2*time.Hour))
	fx.writeAt("b", now.Add(-30*time.Minute))
	err := fx.store.ReleaseTx(fx.ctx, fx.db, func(tx *sql.Tx) error {
		if n, err := fx.store.ReleaseDueIn(fx.ctx, tx, allPartitions(), 100); err != nil || n != 2 {
			return fmt.Errorf("release in an open transaction: %d rows, %v; want 2", n, err)
		}
		ctx, cancel := context.WithTimeout(fx.ctx, 10*time.Second)
		defer cancel()
		w, err := fx.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = w.Rollback() }()
		e := outbox.Event{Topic: "t", AggregateType: "order", AggregateID: "c", EventType: "Happened", Payload: []byte("c"),
			DeliverAt: now.Add(-time.Hour)}
		if err := fx.writer.WriteTx(ctx, w, e); err != nil {
			return fmt.Errorf("a writer's insert of an event due between the released ones, while the release is open: %w", err)
		}
		return w.Commit()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A relay limited to some tenants (Config.Tenants) releases only their due scheduled events, as
// it claims only theirs: another tenant's due events are left to that tenant's relays, so a burst
// of them cannot spend this relay's release budget nor turn them pending when no relay of their
// tenant runs. Its idle wake-up (the next due event) looks at its tenants' events only, too.
func TestStoreReleaseKeepsToTheRelaysTenants(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		write := func(tenant string) uuid.UUID {
			e := outbox.Event{Topic: "t", AggregateType: "order", AggregateID: "k-" + tenant, EventType: "Happened",
				Payload: []byte(tenant), TenantID: tenant, DeliverAt: time.Now().Add(-time.Minute)}
			tx, err := fx.db.BeginTx(fx.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			events := []outbox.Event{e}
			if err := fx.writer.WriteTx(fx.ctx, tx, events...); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			return events[0].ID
		}
		mine, theirs := write("a"), write("b")
		fx.store.Tenants = []string{"a"}
		if err := fx.store.ReleaseDue(fx.ctx, fx.db, allPartitions(), 100); err != nil {
			t.Fatal(err)
		}
		if got := fx.scheduledStatus(mine); got != 0 {
			t.Errorf("the relay's own tenant's due event has status %d, want 0 (released)", got)
		}
		if got := fx.scheduledStatus(theirs); got != 4 {
			t.Errorf("another tenant's due event has status %d after this relay's release, want 4 (left to its own relays)", got)
		}
	})
}

// scheduledStatus is the status of event id's row (any dialect).
func (fx *storeFixture) scheduledStatus(id uuid.UUID) int {
	fx.t.Helper()
	col, ph := "event_id", "?"
	switch fx.store.Dialect {
	case outbox.Postgres:
		col, ph = "event_id::text", "$1"
	}
	var status int
	if err := fx.db.QueryRowContext(fx.ctx, "SELECT status FROM "+fx.writer.Table().Events()+" WHERE "+col+" = "+ph, id.String()).Scan(&status); err != nil {
		fx.t.Fatalf("status of %s: %v", id, err)
	}
	return status
}

// A burst of scheduled events made due at once (a Reschedule of many, or many due the same
// second) is released batch by batch in the scheduled index's order, each release reading the
// rows it releases and stopping there: the table's statistics, which lag a burst just written,
// planned a bitmap scan of every due row and a sort at each release, so a burst of n rows cost
// n²/limit row reads and drained slower than an ordinary backlog.
func TestStoreReleaseOfABurstReadsTheIndexInOrder(t *testing.T) {
	fx := newStoreFixture(t, outbox.Postgres)
	const burst = 2000
	events := make([]outbox.Event, burst)
	ids := make([]uuid.UUID, burst)
	for i := range events {
		events[i] = outbox.Event{Topic: "t", AggregateType: "order", AggregateID: fmt.Sprint("k", i%100), EventType: "Happened",
			Payload: []byte("p"), DeliverAt: time.Now().Add(time.Hour)}
	}
	err := relay.InTx(fx.ctx, fx.db, func(tx *sql.Tx) error {
		if err := fx.writer.WriteTx(fx.ctx, tx, events...); err != nil {
			return err
		}
		for i, e := range events {
			ids[i] = e.ID
		}
		_, err := fx.writer.Reschedule(fx.ctx, wsql.TxFromStdSQL(tx), time.Time{}, ids...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	q := fx.store.SQL().ReleaseDue(allPartitions(), 100)
	var plan []string
	err = relay.InTx(fx.ctx, fx.db, func(tx *sql.Tx) error {
		if setting := fx.store.SQL().ReleasePlan(); setting != "" {
			if _, err := tx.ExecContext(fx.ctx, setting); err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(fx.ctx, "EXPLAIN "+q.SQL, q.Args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, line)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	has := func(parts ...string) bool {
		return slices.ContainsFunc(plan, func(line string) bool {
			for _, part := range parts {
				if !strings.Contains(line, part) {
					return false
				}
			}
			return true
		})
	}
	// The due rows in index order, no more than limit of them; then each released row by its seq.
	if has("Sort") || has("Seq Scan") || has("Bitmap Index Scan", "_scheduled") || !has("Index Scan using", "_scheduled") {
		t.Errorf("the release of a burst of %d due rows does not read the scheduled index in order, or reads more (%d lines):\n%s",
			burst, len(plan), strings.Join(plan, "\n"))
	}
	if err := fx.store.ReleaseDue(fx.ctx, fx.db, allPartitions(), 100); err != nil {
		t.Fatal(err)
	}
	if ids := fx.claim(200, 1<<20); len(ids) != 100 {
		t.Fatalf("claimed %d rows after one release of up to 100, want 100", len(ids))
	}
}
