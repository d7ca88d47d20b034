package middleware_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/middleware"
)

func noopTxHandler(context.Context, *sql.Tx, *message.Message) ([]*message.Message, error) {
	return nil, nil
}

// checkVersionsOnce fails unless every migration of inbox is recorded exactly once.
func checkVersionsOnce(t testing.TB, db *sql.DB, inbox *middleware.Inbox) {
	t.Helper()
	migrations, err := inbox.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	testsupport.CheckVersionsOnce(t, db, inbox.MigrationsTable(), migrations)
}

// TestInboxConcurrentMigrate runs Migrate from 8 instances at once on a fresh inbox table with
// the longest allowed name (48 characters, so the index name is shortened): every run succeeds,
// every version is recorded once, and the table works.
func TestInboxConcurrentMigrate(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		db := d.open(t)
		table := testsupport.UniqueName("inbox_migrated_by_eight_instances__")
		if len(table) != 48 {
			t.Fatalf("table name %q is %d characters, want 48", table, len(table))
		}
		t.Cleanup(func() { dropTables(db, table, table+"_migrations") })
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		inboxes := make([]*middleware.Inbox, 8)
		for n := range inboxes {
			inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: d.dialect, Table: table, ConsumerName: "c"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			inboxes[n] = inbox
		}
		start := make(chan struct{})
		errs := make([]error, len(inboxes))
		var wg sync.WaitGroup
		for n, inbox := range inboxes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[n] = inbox.Migrate(ctx)
			}()
		}
		close(start)
		wg.Wait()
		for n, err := range errs {
			if err != nil {
				t.Errorf("Migrate #%d: %v", n, err)
			}
		}
		checkVersionsOnce(t, db, inboxes[0])
		h := inboxes[0].Handler(noopTxHandler)
		for range 2 {
			if _, err := h(message.NewMessage("same", nil)); err != nil {
				t.Fatal(err)
			}
		}
		if got := inboxes[0].Stats(); got.Processed != 1 || got.Duplicates != 1 {
			t.Fatalf("stats %+v, want 1 processed and 1 duplicate", got)
		}
	})
}

// oldInboxSchema is the DDL of the inbox before its migrations were recorded (middleware/schema).
var oldInboxSchema = map[middleware.Dialect][]string{
	middleware.DialectPostgres: {
		`CREATE TABLE IF NOT EXISTS %[1]s (consumer_name VARCHAR(128) NOT NULL, event_id VARCHAR(255) NOT NULL,
			processed_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (consumer_name, event_id))`,
		`CREATE INDEX IF NOT EXISTS %[1]s_processed_at_idx ON %[1]s (consumer_name, processed_at)`,
	},
	middleware.DialectMySQL: {
		`CREATE TABLE IF NOT EXISTS %[1]s (consumer_name VARBINARY(128) NOT NULL, event_id VARBINARY(255) NOT NULL,
			processed_at DATETIME(6) NOT NULL, PRIMARY KEY (consumer_name, event_id),
			KEY %[1]s_processed_at_idx (consumer_name, processed_at)) ENGINE=InnoDB`,
	},
	middleware.DialectSQLite: {
		`CREATE TABLE IF NOT EXISTS %[1]s (consumer_name TEXT NOT NULL, event_id TEXT NOT NULL,
			processed_at INTEGER NOT NULL, PRIMARY KEY (consumer_name, event_id))`,
		`CREATE INDEX IF NOT EXISTS %[1]s_processed_at_idx ON %[1]s (consumer_name, processed_at)`,
	},
}

// TestInboxMigrateKeepsOldTables: an inbox table created and filled by the code before recorded
// migrations keeps working after Migrate: its events are still duplicates, and pruning keeps
// the recent ones (on SQLite the old integer times are converted to the common text encoding).
func TestInboxMigrateKeepsOldTables(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		db := d.open(t)
		table := testsupport.UniqueName("inbox_old")
		t.Cleanup(func() { dropTables(db, table, table+"_migrations") })
		ctx := context.Background()
		for _, stmt := range oldInboxSchema[d.dialect] {
			if _, err := db.ExecContext(ctx, fmt.Sprintf(stmt, table)); err != nil {
				t.Fatalf("old schema: %v", err)
			}
		}
		now := time.Date(2025, 6, 1, 12, 0, 0, 123456000, time.UTC)
		ph := "?, ?, ?"
		if d.dialect == middleware.DialectPostgres {
			ph = "$1, $2, $3"
		}
		for id, at := range map[string]time.Time{"recent": now.Add(-10 * time.Minute), "stale": now.Add(-48 * time.Hour)} {
			var processedAt any = at
			if d.dialect == middleware.DialectSQLite {
				processedAt = at.UnixMicro() // what the old code stored
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" (consumer_name, event_id, processed_at) VALUES ("+ph+")",
				"c", id, processedAt); err != nil {
				t.Fatalf("old row: %v", err)
			}
		}
		inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: d.dialect, Table: table, ConsumerName: "c",
			Now: func() time.Time { return now }}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := inbox.Migrate(ctx); err != nil {
				t.Fatalf("Migrate over the old table: %v", err)
			}
		}
		checkVersionsOnce(t, db, inbox)
		called := false
		h := inbox.Handler(func(context.Context, *sql.Tx, *message.Message) ([]*message.Message, error) {
			called = true
			return nil, nil
		})
		msg := message.NewMessage("another-uuid", nil)
		msg.Metadata.Set(middleware.DefaultEventIDKey, "recent")
		if _, err := h(msg); err != nil || called {
			t.Fatalf("event processed by the old code: err %v, handler called %v; want a duplicate", err, called)
		}
		if _, err := h(message.NewMessage("new", nil)); err != nil || !called {
			t.Fatalf("new event: err %v, handler called %v", err, called)
		}
		deleted, err := inbox.PruneBefore(ctx, now.Add(-time.Hour), 0)
		if err != nil || deleted != 1 {
			t.Fatalf("PruneBefore(1h ago) deleted %d rows, err %v; want 1 (the stale old row)", deleted, err)
		}
		var left int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&left); err != nil || left != 2 {
			t.Fatalf("rows left %d (err %v), want 2 (recent and new)", left, err)
		}
	})
}

// TestInboxMigrateLeavesApplicationAdvisoryLocksAlone: an application holding the single-key
// advisory lock the inbox migration used to take (hashtext of its name) does not block Migrate.
func TestInboxMigrateLeavesApplicationAdvisoryLocksAlone(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("inbox_applock")
	t.Cleanup(func() { dropTables(db, table, table+"_migrations") })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a bound against a hang
	defer cancel()
	app, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	oldKey := "outboxkit_inbox_migrate:" + table
	if _, err := app.ExecContext(ctx, "SELECT pg_advisory_lock(hashtext($1))", oldKey); err != nil {
		t.Fatalf("application lock: %v", err)
	}
	defer func() { _, _ = app.ExecContext(context.Background(), "SELECT pg_advisory_unlock_all()") }()

	// Control: the application's lock is real, the old migration lock would have waited.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '200ms'"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", oldKey); err == nil {
		t.Fatal("the application's lock did not hold: the test would prove nothing")
	}
	_ = tx.Rollback()

	inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: middleware.DialectPostgres, Table: table, ConsumerName: "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A Migrate that waited for the application's lock would wait until this bound ends.
	quick, cancelQuick := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelQuick()
	if err := inbox.Migrate(quick); err != nil {
		t.Fatalf("Migrate while the application holds its advisory lock: %v", err)
	}
}
