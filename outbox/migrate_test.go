package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

func openDialect(t testing.TB, d outbox.Dialect) *sql.DB {
	t.Helper()
	switch d {
	case outbox.Postgres:
		return testsupport.OpenPostgres(t)
	case outbox.MySQL:
		return testsupport.OpenMySQL(t)
	}
	return openSQLite(t)
}

// dropWithTest drops the tables when the test ends.
func dropWithTest(t testing.TB, db *sql.DB, tables ...string) {
	t.Cleanup(func() {
		for _, tbl := range tables {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tbl)
		}
	})
}

// runConcurrently calls f from n goroutines at once and returns their errors.
func runConcurrently(n int, f func() error) []error {
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f()
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// TestConcurrentMigrate runs Migrate on a fresh table from 8 goroutines at once: every run
// succeeds and every embedded version is recorded exactly once.
func TestConcurrentMigrate(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			db := openDialect(t, d)
			// The longest name allowed: its derived names are longer.
			table, err := outbox.NewTable(d, testsupport.UniqueName("outbox_migrated_by_eight_goroutines"))
			if err != nil {
				t.Fatal(err)
			}
			dropWithTest(t, db, table.Events(), table.Leases(), table.Relays(), table.KeyLocks(), table.Migrations())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for i, err := range runConcurrently(8, func() error { return outbox.Migrate(ctx, db, table) }) {
				if err != nil {
					t.Errorf("Migrate #%d: %v", i, err)
				}
			}
			migrations, err := outbox.Migrations(table)
			if err != nil {
				t.Fatal(err)
			}
			testsupport.CheckVersionsOnce(t, db, table.Migrations(), migrations)
		})
	}
}

// TestRunMigrationsSerializesRuns: migrations that are not idempotent (each inserts a row) run
// from 8 goroutines at once are applied exactly once, which only holds if the runs are locked
// against each other: without the lock several runs see a version as missing and apply it.
func TestRunMigrationsSerializesRuns(t *testing.T) {
	sleep := map[outbox.Dialect]string{outbox.Postgres: "SELECT pg_sleep(0.05)", outbox.MySQL: "SELECT SLEEP(0.05)"}
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			db := openDialect(t, d)
			counter := testsupport.UniqueName("applied")
			versionTable := counter + "_migrations"
			dropWithTest(t, db, counter, versionTable)
			var migrations []outbox.Migration
			for v := 1; v <= 2; v++ {
				m := outbox.Migration{Version: v, Name: fmt.Sprintf("%04d_count.sql", v), Statements: []string{
					"CREATE TABLE IF NOT EXISTS " + counter + " (version INTEGER NOT NULL)",
				}}
				if s := sleep[d]; s != "" {
					m.Statements = append(m.Statements, s)
				}
				m.Statements = append(m.Statements, fmt.Sprintf("INSERT INTO %s (version) VALUES (%d)", counter, v))
				migrations = append(migrations, m)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for i, err := range runConcurrently(8, func() error {
				return outbox.RunMigrations(ctx, db, d, versionTable, migrations)
			}) {
				if err != nil {
					t.Errorf("RunMigrations #%d: %v", i, err)
				}
			}
			applied := testsupport.RecordedVersions(t, db, counter) // the counter table has the same shape
			if len(applied) != 2 || applied[1] != 1 || applied[2] != 1 {
				t.Errorf("migrations applied (version: times) %v, want each of 1 and 2 once", applied)
			}
			if got := testsupport.RecordedVersions(t, db, versionTable); len(got) != 2 || got[1] != 1 || got[2] != 1 {
				t.Errorf("recorded versions %v, want 1 and 2 once each", got)
			}
		})
	}
}

func TestRunMigrationsValidatesTheVersionTable(t *testing.T) {
	db := openSQLite(t)
	err := outbox.RunMigrations(context.Background(), db, outbox.SQLite, "x; DROP TABLE y", nil)
	if err == nil || !strings.Contains(err.Error(), `"x; DROP TABLE y"`) {
		t.Fatalf("RunMigrations with a bad table name: err %v, want it naming the value", err)
	}
}

// TestAdvisoryLocksLeaveApplicationLocksAlone: an application holding single-key advisory locks
// on the very values outboxkit used to lock (the migration lock and a key's write lock) blocks
// neither the migration nor a write of that key, because outboxkit's locks are two-key locks in
// their own namespace.
func TestAdvisoryLocksLeaveApplicationLocksAlone(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("outbox")})
	if err != nil {
		t.Fatal(err)
	}
	table := w.Table()
	dropWithTest(t, db, table.Events(), table.Leases(), table.Relays(), table.KeyLocks(), table.Migrations())
	e := orderEvent("order-held-by-the-app", 1)
	oldMigrateLock := outbox.KeyHash("outboxkit-migrate", "", table.Events())
	oldWriteLock := outbox.KeyHash(e.TenantID, e.AggregateType, e.AggregateID)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a bound against a hang
	defer cancel()
	app, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if _, err := app.ExecContext(ctx, "SELECT pg_advisory_lock($1), pg_advisory_lock($2)", oldMigrateLock, oldWriteLock); err != nil {
		t.Fatalf("application locks: %v", err)
	}
	defer func() { _, _ = app.ExecContext(context.Background(), "SELECT pg_advisory_unlock_all()") }()

	// Control: the application's locks are real, a single-key lock on the same value waits.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '200ms'"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", oldMigrateLock); err == nil {
		t.Fatal("the application's lock did not hold: the test would prove nothing")
	}
	_ = tx.Rollback()

	// A Migrate that waited for the application's locks would wait until this bound ends.
	quick, cancelQuick := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelQuick()
	if err := outbox.Migrate(quick, db, table); err != nil {
		t.Fatalf("Migrate while the application holds its advisory locks: %v", err)
	}
	tx, err = db.BeginTx(quick, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := w.WriteTx(quick, tx, e); err != nil {
		t.Fatalf("write while the application holds its advisory locks: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresDropsParkedIndex: version 4 drops <table>_parked on PostgreSQL, on an upgraded
// table as on a new one, also in a schema other than the search path's (DROP INDEX needs the
// schema), and leaves the indexes the relays use.
func TestPostgresDropsParkedIndex(t *testing.T) {
	db := openDialect(t, outbox.Postgres)
	ctx := context.Background()
	schema := testsupport.UniqueName("obk_schema")
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	for _, name := range []string{testsupport.UniqueName("outbox_v4"), schema + ".outbox_v4"} {
		t.Run(name, func(t *testing.T) {
			table, err := outbox.NewTable(outbox.Postgres, name)
			if err != nil {
				t.Fatal(err)
			}
			dropWithTest(t, db, table.Events(), table.Leases(), table.Relays(), table.CDCSlots(), table.Migrations())
			migrations, err := outbox.Migrations(table)
			if err != nil {
				t.Fatal(err)
			}
			if err := outbox.RunMigrations(ctx, db, outbox.Postgres, table.Migrations(), migrations[:3]); err != nil {
				t.Fatal(err)
			}
			indexes := func() []string {
				var names []string
				rows, err := db.QueryContext(ctx, "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = $1::regclass ORDER BY 1", table.Events())
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				for rows.Next() {
					var n string
					if err := rows.Scan(&n); err != nil {
						t.Fatal(err)
					}
					names = append(names, n[strings.LastIndexByte(n, '.')+1:])
				}
				return names
			}
			short := name[strings.LastIndexByte(name, '.')+1:]
			if got := indexes(); !slices.Contains(got, short+"_parked") {
				t.Fatalf("indexes at version 3: %v, want %s_parked among them", got, short)
			}
			if err := outbox.Migrate(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			// v11 adds the scheduled events' two (scheduled.md).
			want := []string{short + "_pending", short + "_pkey", short + "_published", short + "_retry_keys", short + "_scheduled", short + "_scheduled_id"}
			if got := indexes(); !slices.Equal(got, want) {
				t.Fatalf("indexes at the latest version: %v, want %v", got, want)
			}
		})
	}
}
