package forwarder

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/exactlyonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/outbox"
)

// unitCountDB returns a migrated SQLite outbox for the unit-count tests.
func unitCountDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table, err := outbox.NewTable(outbox.SQLite, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return db
}

// startExactlyOnce makes a forwarder with units (0: the default) and runs its pipeline's start.
func startExactlyOnce(t *testing.T, db *sql.DB, units int) (*Forwarder, error) {
	t.Helper()
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: &fakeTxPublisher{}, Delivery: ExactlyOnce, TransactionalUnits: units})
	if err != nil {
		t.Fatal(err)
	}
	return f, f.deliverer.Start(context.Background())
}

// exactlyOnceOf is the exactly-once deliverer of f.
func exactlyOnceOf(t *testing.T, f *Forwarder) *exactlyonce.Deliverer {
	t.Helper()
	d, ok := f.deliverer.Deliverer.(*exactlyonce.Deliverer)
	if !ok {
		t.Fatalf("the forwarder's deliverer is %T, not exactly-once", f.deliverer.Deliverer)
	}
	return d
}

// legacyUnits gives the units table a row for each of the first n units of the group, as the
// openings of a relay of an earlier version did (without the count row), and returns the
// group's prefix.
func legacyUnits(t *testing.T, db *sql.DB, n int) string {
	t.Helper()
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: &fakeTxPublisher{}, Delivery: ExactlyOnce})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := f.store.InstallationID(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	prefix := bookkeeping.DefaultTransactionalIDPrefix(id, f.store.Table.Events(), f.cfg.LeaseGroup)
	for u := range n {
		if err := f.store.EnsureUnitRow(ctx, db, bookkeeping.UnitName(prefix, u)); err != nil {
			t.Fatal(err)
		}
	}
	return prefix
}

// TestUnitCountDefaultsToTheGroupsRecordedOne: a group that never ran exactly-once gets the
// default (2 with 2 workers); a group whose units table has the rows of 8 units, made by a relay
// of an earlier version (default 8), keeps 8 when TransactionalUnits is unset, so an upgrade does
// not regroup its partitions while rows of the old units' checkpoints may be pending.
func TestUnitCountDefaultsToTheGroupsRecordedOne(t *testing.T) {
	fresh, err := startExactlyOnce(t, unitCountDB(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := exactlyOnceOf(t, fresh).Units(); got != 2 {
		t.Fatalf("a new group got %d units, want 2", got)
	}
	db := unitCountDB(t)
	legacyUnits(t, db, 8)
	upgraded, err := startExactlyOnce(t, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, share := exactlyOnceOf(t, upgraded).Units(), upgraded.leases.Share(); got != 8 || share != lease.Units(8) {
		t.Fatalf("a group with the rows of 8 units got %d units (share policy %#v), want 8", got, share)
	}
}

// TestUnitCountOtherThanTheGroupsIsRefused: a configured count other than the group's recorded
// one is refused at start, naming both, as a permanent error (Run returns it at once).
func TestUnitCountOtherThanTheGroupsIsRefused(t *testing.T) {
	db := unitCountDB(t)
	first, err := startExactlyOnce(t, db, 8)
	if err != nil {
		t.Fatal(err)
	}
	_, err = startExactlyOnce(t, db, 4)
	if !errors.Is(err, ErrUnitCountMismatch) || !strings.Contains(err.Error(), "is 4") || !strings.Contains(err.Error(), "runs with 8 units") {
		t.Fatalf("4 units on a group of 8: %v, want ErrUnitCountMismatch naming 4 and 8", err)
	}
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: &fakeTxPublisher{}, Delivery: ExactlyOnce, TransactionalUnits: 16,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Run must return the refusal, not retry it: a Run that retried would end with its context,
	// whose deadline is only a bound against a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.Run(ctx); !errors.Is(err, ErrUnitCountMismatch) || ctx.Err() != nil {
		t.Fatalf("Run with 16 units on a group of 8 returned %v (context: %v), want ErrUnitCountMismatch before its context ended", err, ctx.Err())
	}
	if n, err := first.store.UnitCount(context.Background(), db, exactlyOnceOf(t, first).Prefix()); err != nil || n != 8 {
		t.Fatalf("after the refusals the units table records %d units (%v), want 8", n, err)
	}
}

// TestUnitCountOfAPartlyOpenedGroup: a group whose relay of an earlier version opened only units
// 0-5 of its 8 counts as 8 (the smallest count above the highest unit): a relay with the count
// unset keeps 8 and records it; one configured with 4 is refused (and records 8 all the same).
func TestUnitCountOfAPartlyOpenedGroup(t *testing.T) {
	db := unitCountDB(t)
	prefix := legacyUnits(t, db, 6)
	if _, err := startExactlyOnce(t, db, 4); !errors.Is(err, ErrUnitCountMismatch) || !strings.Contains(err.Error(), "runs with 8 units") {
		t.Fatalf("4 units on a group with the rows of units 0-5: %v, want ErrUnitCountMismatch naming 8", err)
	}
	upgraded, err := startExactlyOnce(t, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := exactlyOnceOf(t, upgraded).Units(); got != 8 {
		t.Fatalf("a group with the rows of units 0-5 got %d units, want 8", got)
	}
	if n, err := upgraded.store.UnitCount(context.Background(), db, prefix); err != nil || n != 8 {
		t.Fatalf("the recorded count is %d (%v), want 8", n, err)
	}
}

// TestUnitOpeningChecksTheCount: a unit is opened only while the units table records the
// relay's count; one changed in the table while the relay runs stops its openings (and so its
// publishing). One unit: SQLite takes one opening at a time.
func TestUnitOpeningChecksTheCount(t *testing.T) {
	db := unitCountDB(t)
	txp := &fakeTxPublisher{}
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: txp, Delivery: ExactlyOnce, TransactionalUnits: 1,
		Workers: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.start(ctx); err != nil {
		t.Fatal(err)
	}
	leases, err := f.store.LiveLeases(ctx, db, f.cfg.RelayID, 0, 1)
	if err != nil || len(leases) != outbox.Partitions {
		t.Fatalf("the relay holds %d leases (%v), want all %d", len(leases), err, outbox.Partitions)
	}
	if _, err := db.Exec("UPDATE "+f.store.Table.Units()+" SET cleaned = '8' WHERE unit = ?", bookkeeping.UnitCountRow(exactlyOnceOf(t, f).Prefix())); err != nil {
		t.Fatal(err)
	}
	if _, err := f.deliverer.Ready(ctx, 0, leases); !errors.Is(err, ErrUnitCountMismatch) {
		t.Fatalf("opening the unit of a relay with 1 where the table records 8: %v, want ErrUnitCountMismatch", err)
	}
	if txp.open(bookkeeping.UnitName(exactlyOnceOf(t, f).Prefix(), 0)) {
		t.Fatal("a unit was left open: the relay could publish with a count the group does not run with")
	}
}

// TestUnitCountOfRelaysStartingTogether: two relays that start at the same moment on a new group,
// one with 2 units and one with 8, agree on the count the first of them recorded: one starts,
// the other is refused.
func TestUnitCountOfRelaysStartingTogether(t *testing.T) {
	db := unitCountDB(t)
	errs := make(chan error, 2)
	for _, units := range []int{2, 8} {
		go func() { _, err := startExactlyOnce(t, db, units); errs <- err }()
	}
	first, second := <-errs, <-errs
	if (first == nil) == (second == nil) || !errors.Is(errors.Join(first, second), ErrUnitCountMismatch) {
		t.Fatalf("relays with 2 and 8 units started together: %v and %v, want one started and one ErrUnitCountMismatch", first, second)
	}
}

// TestRunEndsWhenAUnitOpeningIsRefused: a relay whose unit count the units table no longer
// records (changed by hand while it runs) stops: Run releases its leases and returns
// ErrUnitCountMismatch instead of holding its partitions and retrying the opening for ever.
// fakeTxPublisher fails every commit, so the unit is opened again before each try.
func TestRunEndsWhenAUnitOpeningIsRefused(t *testing.T) {
	db := unitCountDB(t)
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	event, err := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPlaced", map[string]int{"total": 42})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.WriteTx(context.Background(), tx, event); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: &fakeTxPublisher{}, Delivery: ExactlyOnce, TransactionalUnits: 1,
		Workers: 1, MinPollInterval: time.Millisecond, MaxPollInterval: 20 * time.Millisecond, InitialInterval: time.Millisecond,
		MaxInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Bounds against a hang, not speed checks: a relay that kept running would reach them.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	for opened := 0; opened == 0; time.Sleep(10 * time.Millisecond) {
		if err := db.QueryRow("SELECT count(*) FROM " + f.store.Table.Units() + " WHERE unit LIKE '%/u00'").Scan(&opened); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatal("the relay did not open its unit")
		}
	}
	if _, err := db.Exec("UPDATE " + f.store.Table.Units() + " SET cleaned = '8' WHERE unit LIKE '%/units'"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnitCountMismatch) {
			t.Fatalf("Run returned %v, want ErrUnitCountMismatch", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the relay kept running 2 minutes after its unit count was refused")
	}
	var held int
	if err := db.QueryRow("SELECT count(*) FROM "+f.store.Table.Leases()+" WHERE owner = ?", f.cfg.RelayID).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("the stopped relay still holds %d leases", held)
	}
}

// TestRunReturnsNilWhenStoppedWithAMismatchOfAnotherRelay: a relay stopped through its context,
// whatever the context's cause (errgroup cancels with the first error of a sibling, here
// another relay's refused count), stopped as asked: Run returns nil. Only its own refusal is
// its error.
func TestRunReturnsNilWhenStoppedWithAMismatchOfAnotherRelay(t *testing.T) {
	db := unitCountDB(t)
	f, err := New(Config{DB: db, Dialect: outbox.SQLite, Publisher: &fakeTxPublisher{}, Delivery: ExactlyOnce, TransactionalUnits: 1,
		Workers: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	// Cancelled once it runs: a relay cancelled while it starts returns nil on another path.
	for held := 0; held == 0; time.Sleep(10 * time.Millisecond) {
		if err := db.QueryRow("SELECT count(*) FROM "+f.store.Table.Leases()+" WHERE owner = ?", f.cfg.RelayID).Scan(&held); err != nil {
			t.Fatal(err)
		}
	}
	cancel(fmt.Errorf("another relay: %w", ErrUnitCountMismatch))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run stopped by its context returned %v, want nil", err)
		}
	case <-time.After(2 * time.Minute): // a bound against a hang
		t.Fatal("Run did not return 2 minutes after its context was cancelled")
	}
}
