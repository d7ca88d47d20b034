package forwarder

import (
	"context"
	"slices"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// The cdc source's release of due scheduled events (docs/cdc.md, "Scheduled events"), on
// PostgreSQL: it writes each due row again, under a new seq, so that the stream carries it; a
// cancel and a release of one row never both succeed, whichever transaction holds the row first.

// releaseByWrite runs the cdc release in a transaction of its own and returns how many rows it
// released.
func (fx *storeFixture) releaseByWrite() int64 {
	fx.t.Helper()
	n, err := fx.store.ReleaseDueByWrite(fx.ctx, fx.db, 100)
	if err != nil {
		fx.t.Fatal(err)
	}
	return n
}

// eventRow is a row's columns as text, but its seq, and its seq.
func (fx *storeFixture) eventRow(id uuid.UUID) (seq int64, row string) {
	fx.t.Helper()
	err := fx.db.QueryRowContext(fx.ctx, "SELECT seq, (to_jsonb(e) - 'seq' - 'status')::text FROM "+fx.writer.Table().Events()+
		" e WHERE event_id = $1", id).Scan(&seq, &row)
	if err != nil {
		fx.t.Fatalf("read the row of %s: %v", id, err)
	}
	return seq, row
}

// Only due rows are released: each under a new seq, pending, with every other column as it was
// (payload, headers, created_at, deliver_at, ...); a row not due stays scheduled.
func TestStoreCDCReleaseWritesDueRowsAgain(t *testing.T) {
	fx := newStoreFixture(t, outbox.Postgres)
	due := fx.writeAt("k", time.Now().Add(-time.Minute))
	future := fx.writeAt("k", time.Now().Add(time.Hour))
	oldSeq, before := fx.eventRow(due)
	if n := fx.releaseByWrite(); n != 1 {
		t.Fatalf("released %d rows, want 1 (the due one)", n)
	}
	newSeq, after := fx.eventRow(due)
	if newSeq <= oldSeq {
		t.Errorf("the released row has seq %d, want a new seq above %d", newSeq, oldSeq)
	}
	if after != before {
		t.Errorf("the released row changed:\nbefore %s\nafter  %s", before, after)
	}
	if got := fx.statusOf(due); got != 0 {
		t.Errorf("the released row has status %d, want 0 (pending)", got)
	}
	if got := fx.statusOf(future); got != 4 {
		t.Errorf("the row due in an hour has status %d, want 4 (scheduled)", got)
	}
	if n := fx.releaseByWrite(); n != 0 {
		t.Errorf("a second release released %d rows, want 0", n)
	}
}

// Events of one key that come due together are written again in sequence order, so the stream
// carries them in that order.
func TestStoreCDCReleaseKeepsSequenceOrder(t *testing.T) {
	fx := newStoreFixture(t, outbox.Postgres)
	at := time.Now().Add(-time.Minute)
	var ids []uuid.UUID
	for range 5 {
		ids = append(ids, fx.writeAt("k", at))
	}
	if n := fx.releaseByWrite(); n != 5 {
		t.Fatalf("released %d rows, want 5", n)
	}
	var seqs []int64
	for _, id := range ids {
		seq, _ := fx.eventRow(id)
		seqs = append(seqs, seq)
	}
	if !slices.IsSorted(seqs) {
		t.Fatalf("the released rows of one key, in the order written, have seqs %v, want them ascending", seqs)
	}
}

func (fx *storeFixture) statusOf(id uuid.UUID) int {
	fx.t.Helper()
	var status int
	if err := fx.db.QueryRowContext(fx.ctx, "SELECT status FROM "+fx.writer.Table().Events()+" WHERE event_id = $1", id).Scan(&status); err != nil {
		fx.t.Fatalf("status of %s: %v", id, err)
	}
	return status
}

// The cancel holds the row first: the release, run while the cancel's transaction is open,
// skips the row; once the cancel commits, the event is gone and never released.
func TestStoreCDCCancelHeldWhileRelayReleases(t *testing.T) {
	fx := newStoreFixture(t, outbox.Postgres)
	id := fx.writeAt("k", time.Now().Add(-time.Minute))
	tx, res := fx.cancelTx(id)
	if !slices.Equal(res.Changed, []uuid.UUID{id}) {
		t.Fatalf("cancel: %+v, want %s cancelled", res, id)
	}
	if n := fx.releaseByWrite(); n != 0 {
		t.Fatalf("while the cancel is open the release released %d rows, want 0", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := fx.releaseByWrite(); n != 0 {
		t.Fatalf("after the cancel committed the release released %d rows, want 0", n)
	}
	var rows int
	if err := fx.db.QueryRowContext(fx.ctx, "SELECT COUNT(*) FROM "+fx.writer.Table().Events()).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d rows left (%v), want none", rows, err)
	}
}

// A cancel whose transaction rolls back leaves the event to the release.
func TestStoreCDCCancelRolledBackIsReleased(t *testing.T) {
	fx := newStoreFixture(t, outbox.Postgres)
	id := fx.writeAt("k", time.Now().Add(-time.Minute))
	tx, _ := fx.cancelTx(id)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := fx.releaseByWrite(); n != 1 || fx.statusOf(id) != 0 {
		t.Fatalf("after the cancel rolled back the release released %d rows, want the event", n)
	}
}

// The release holds the row first: a cancel run while the release's transaction is open waits
// for it, then does not find the row it waited for (deleted) nor delete the one written again
// (not in its snapshot), and reports the event released; the event stays pending.
func TestStoreCDCReleaseHeldWhileCancelRuns(t *testing.T) {
	fx := newStoreFixture(t, outbox.Postgres)
	id := fx.writeAt("k", time.Now().Add(-time.Minute))
	release, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = release.Rollback() }()
	if n, err := fx.store.ReleaseDueByWriteIn(fx.ctx, release, 100); err != nil || n != 1 {
		t.Fatalf("release in an open transaction: %d rows, %v; want 1", n, err)
	}
	type result struct {
		res outbox.ScheduleResult
		err error
	}
	done := make(chan result, 1)
	pids := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(fx.ctx, time.Minute)
		defer cancel()
		tx, err := fx.db.BeginTx(ctx, nil)
		if err != nil {
			pids <- 0
			done <- result{err: err}
			return
		}
		var pid int
		_ = tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid)
		pids <- pid
		res, err := fx.writer.Cancel(ctx, wsql.TxFromStdSQL(tx), id)
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
		done <- result{res, err}
	}()
	// The release commits only once the cancel waits for its row lock.
	fx.waitForLockWait(<-pids)
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
	if got := fx.statusOf(id); got != 0 {
		t.Fatalf("the released event has status %d, want 0 (pending)", got)
	}
}

// waitForLockWait waits until the backend pid waits for a lock (fails the test after a minute).
func (fx *storeFixture) waitForLockWait(pid int) {
	fx.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting bool
		err := fx.db.QueryRowContext(fx.ctx, "SELECT COALESCE((SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1), false)", pid).Scan(&waiting)
		if err != nil {
			fx.t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			fx.t.Fatalf("backend %d did not wait for a lock within a minute", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The cdc stall check ages a released scheduled row from its delivery time, not from its write:
// an event written an hour ago for delivery a second ago has waited a second in the stream's
// view, and counting it stranded would report a stall each time a long-scheduled event comes due
// on a quiet stream. An ordinary row written an hour ago is counted.
func TestStoreStrandedRowsAgeAReleasedRowFromItsDueTime(t *testing.T) {
	fx := newStoreFixture(t, outbox.Postgres)
	released := fx.writeAt("k", time.Now().Add(time.Hour))
	ordinary := fx.writeAt("o", time.Time{})
	for _, set := range []struct {
		id  uuid.UUID
		sql string
	}{
		{released, "created_at = now() - interval '1 hour', deliver_at = clock_timestamp() - interval '1 second'"},
		{ordinary, "created_at = now() - interval '1 hour'"},
	} {
		if _, err := fx.db.ExecContext(fx.ctx, "UPDATE "+fx.writer.Table().Events()+" SET "+set.sql+" WHERE event_id = $1", set.id); err != nil {
			t.Fatal(err)
		}
	}
	if n := fx.releaseByWrite(); n != 1 {
		t.Fatalf("released %d rows, want 1", n)
	}
	n, oldest, err := fx.store.StrandedRows(fx.ctx, fx.db, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || oldest < 59*time.Minute {
		t.Fatalf("stranded rows older than a minute: %d, the oldest %s; want 1 (the ordinary row written an hour ago), "+
			"not the scheduled one due a second ago", n, oldest)
	}
}
