package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// notifications is a session LISTENing on an outbox table's channel.
type notifications struct{ conn *pgx.Conn }

func listenTo(t *testing.T, table outbox.Table) notifications {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{table.Channel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return notifications{conn: conn}
}

// received reports whether a notification arrives within d.
func (n notifications) received(t *testing.T, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := n.conn.WaitForNotification(ctx)
	if err != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("wait for a notification: %v", err)
	}
	return err == nil
}

// waitLock is a session that takes the table's wake-up lock as a waiting relay's listener does.
func waitLock(t *testing.T, db *sql.DB, table outbox.Table) (*sql.Conn, func() bool) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	try := func() bool {
		var locked bool
		if err := conn.QueryRowContext(context.Background(), "SELECT pg_try_advisory_lock($1, $2)",
			outbox.WakeNamespace, table.WakeLock()).Scan(&locked); err != nil {
			t.Fatal(err)
		}
		return locked
	}
	return conn, try
}

// TestNotifyOnlyWhileARelayWaits: with schema v8 a committing insert notifies the table's channel
// only while a session holds the wake-up lock (a waiting relay), from outbox.Writer and from a
// plain-SQL writer alike; and a writer that did not notify keeps the lock from being taken until
// its transaction ends, so that a relay starts waiting only after the rows it was not told of
// are visible.
func TestNotifyOnlyWhileARelayWaits(t *testing.T) {
	tg := newSQLTarget(t, outbox.Postgres)
	ctx := context.Background()
	table := tg.writer.Table()
	listen := listenTo(t, table)
	write := func(plainSQL bool, id string) {
		t.Helper()
		if plainSQL {
			if err := tg.insertSQL(ctx, tg.db, newSQLEvent("", "order", id, 1)); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := tg.placeOrder(ctx, id, true, orderEvent(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, plainSQL := range []bool{false, true} {
		write(plainSQL, fmt.Sprintf("unwatched-%t", plainSQL))
		if listen.received(t, 300*time.Millisecond) {
			t.Fatalf("plain SQL %t: a commit notified while no relay waited", plainSQL)
		}
	}

	relay, tryLock := waitLock(t, tg.db, table)
	if !tryLock() {
		t.Fatal("the wake-up lock is taken although no writer is open")
	}
	for _, plainSQL := range []bool{false, true} {
		write(plainSQL, fmt.Sprintf("watched-%t", plainSQL))
		if !listen.received(t, time.Minute) { // a bound against a hang: it returns on the notification
			t.Fatalf("plain SQL %t: a commit did not notify while a relay waited", plainSQL)
		}
	}
	if _, err := relay.ExecContext(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		t.Fatal(err)
	}

	tx, err := tg.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tg.writer.WriteTx(ctx, tx, orderEvent("open", 1)); err != nil {
		t.Fatal(err)
	}
	if tryLock() {
		t.Fatal("a relay could start waiting while a writer that did not notify was open: its row would wait for the next poll")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !tryLock() {
		t.Fatal("the wake-up lock stayed taken after the writer committed")
	}
}

// TestMigrationKeepsTheNotifyTriggerAsItWas: version 8 makes an existing notify trigger
// conditional on a waiting relay, on an upgraded table (also in another schema), and does not
// create it again on a table whose trigger was dropped for the cdc source.
func TestMigrationKeepsTheNotifyTriggerAsItWas(t *testing.T) {
	db := openDialect(t, outbox.Postgres)
	ctx := context.Background()
	schema := testsupport.UniqueName("obk_schema")
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	for _, c := range []struct {
		name    string
		dropped bool
	}{{testsupport.UniqueName("outbox_v8"), false}, {schema + ".outbox_v8", false}, {testsupport.UniqueName("outbox_cdc"), true}} {
		t.Run(fmt.Sprintf("%s/dropped=%t", c.name, c.dropped), func(t *testing.T) {
			table, err := outbox.NewTable(outbox.Postgres, c.name)
			if err != nil {
				t.Fatal(err)
			}
			dropWithTest(t, db, table.Events(), table.Leases(), table.Relays(), table.CDCSlots(), table.Installation(), table.Units(), table.Migrations())
			migrations, err := outbox.Migrations(table)
			if err != nil {
				t.Fatal(err)
			}
			if err := outbox.RunMigrations(ctx, db, outbox.Postgres, table.Migrations(), migrations[:7]); err != nil {
				t.Fatal(err)
			}
			short := c.name[strings.LastIndexByte(c.name, '.')+1:]
			if c.dropped {
				if _, err := db.ExecContext(ctx, "DROP TRIGGER "+short+"_notify ON "+table.Events()); err != nil {
					t.Fatal(err)
				}
			}
			if err := outbox.Migrate(ctx, db, table); err != nil {
				t.Fatal(err)
			}
			var def sql.NullString
			if err := db.QueryRowContext(ctx, "SELECT (SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname = $2)",
				table.Events(), short+"_notify").Scan(&def); err != nil {
				t.Fatal(err)
			}
			switch {
			case c.dropped && def.Valid:
				t.Fatalf("the migration created the dropped notify trigger again: %s", def.String)
			case !c.dropped && (!strings.Contains(def.String, fmt.Sprintf("WHEN ((NOT pg_try_advisory_xact_lock_shared(%d, ", outbox.WakeNamespace)) ||
				!strings.Contains(def.String, fmt.Sprint(table.WakeLock()))):
				t.Fatalf("notify trigger after version 8: %q, want it conditional on the wake-up lock", def.String)
			}
		})
	}
}
