package middleware_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/middleware"
	"github.com/outboxkit/outboxkit/outbox"
)

// database is one of the three databases the inbox supports, opened for a test.
type database struct {
	name    string
	dialect middleware.Dialect
	open    func(t testing.TB) *sql.DB
	// lockWaiters counts sessions blocked on a row lock in a statement mentioning table;
	// nil where the database cannot tell (SQLite).
	lockWaiters func(ctx context.Context, db *sql.DB, table string) (int, error)
}

func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "inbox.db") +
		"?_pragma=busy_timeout(20000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// WAL once, on one connection (it persists in the file), not as a DSN pragma that every new
	// connection runs: connections opened at once could fail with SQLITE_BUSY at connect.
	if _, err := db.Exec("PRAGMA journal_mode=WAL"); err != nil {
		t.Fatalf("sqlite WAL: %v", err)
	}
	return db
}

func databases() []database {
	return []database{
		{name: "postgres", dialect: middleware.DialectPostgres,
			open: func(t testing.TB) *sql.DB { return testsupport.OpenPostgres(t) },
			lockWaiters: func(ctx context.Context, db *sql.DB, table string) (n int, err error) {
				err = db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'", table).Scan(&n)
				return n, err
			}},
		{name: "mariadb", dialect: middleware.DialectMySQL,
			open: func(t testing.TB) *sql.DB { return testsupport.OpenMySQL(t) },
			lockWaiters: func(ctx context.Context, db *sql.DB, table string) (n int, err error) {
				// Sessions still inside the inbox INSERT while the first delivery's transaction is
				// open are blocked on it. (information_schema.innodb_trx proved unreliable here:
				// MariaDB 10.11 sometimes leaves one waiting transaction out.)
				err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?", "INSERT IGNORE INTO "+table+" %").Scan(&n)
				return n, err
			}},
		{name: "sqlite", dialect: middleware.DialectSQLite, open: openSQLite},
	}
}

// fixture is an inbox plus an "effects" table standing for the handler's business data. The
// effects table has no unique key, so a second effect of one event would show as a second row.
type fixture struct {
	db      *sql.DB
	dialect middleware.Dialect
	inbox   *middleware.Inbox
	table   string
	effects string
}

func newFixture(t testing.TB, d database) *fixture {
	t.Helper()
	db := d.open(t)
	f := &fixture{db: db, dialect: d.dialect, table: testsupport.UniqueName("inbox"), effects: testsupport.UniqueName("effects")}
	inbox, err := middleware.NewInbox(middleware.InboxConfig{
		DB: db, Dialect: d.dialect, Table: f.table, ConsumerName: "billing",
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("NewInbox: %v", err)
	}
	f.inbox = inbox
	ctx := context.Background()
	if err := inbox.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	t.Cleanup(func() {
		dropTables(db, f.table, f.table+"_migrations", f.effects)
	})
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+f.effects+" (event_id VARCHAR(255) NOT NULL, note VARCHAR(100) NOT NULL)"); err != nil {
		t.Fatalf("create effects table: %v", err)
	}
	return f
}

// dropTables drops the tables, ignoring errors (a test's cleanup).
func dropTables(db *sql.DB, tables ...string) {
	for _, table := range tables {
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
	}
}

func (f *fixture) ph(n int) string {
	if f.dialect == middleware.DialectPostgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// addEffect is the handler's business write, made on the inbox transaction.
func (f *fixture) addEffect(ctx context.Context, tx *sql.Tx, msg *message.Message) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO "+f.effects+" (event_id, note) VALUES ("+f.ph(1)+", "+f.ph(2)+")",
		msg.Metadata.Get("event_id"), string(msg.Payload))
	if err != nil {
		return fmt.Errorf("insert effect: %w", err)
	}
	return nil
}

func (f *fixture) count(t *testing.T, table, eventID string) int {
	t.Helper()
	var n int
	if err := f.db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE event_id = "+f.ph(1), eventID).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func eventMsg(eventID, payload string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(payload))
	msg.Metadata.Set("event_id", eventID)
	return msg
}

func forEachDatabase(t *testing.T, fn func(t *testing.T, d database)) {
	for _, d := range databases() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			fn(t, d)
		})
	}
}

func TestInboxRedeliveredEventHasOneEffect(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		var calls atomic.Int32
		h := f.inbox.Handler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error) {
			calls.Add(1)
			return []*message.Message{message.NewMessage(watermill.NewUUID(), []byte("follow-up"))}, f.addEffect(ctx, tx, msg)
		})
		eventID := watermill.NewUUID()
		// Two deliveries of one event, as two broker messages with distinct UUIDs.
		produced, err := h(eventMsg(eventID, "first"))
		if err != nil || len(produced) != 1 {
			t.Fatalf("first delivery: produced %d messages, err %v; want 1, nil", len(produced), err)
		}
		produced, err = h(eventMsg(eventID, "second"))
		if err != nil || len(produced) != 0 {
			t.Fatalf("redelivery: produced %d messages, err %v; want 0, nil (acknowledged as duplicate)", len(produced), err)
		}
		if got := calls.Load(); got != 1 {
			t.Fatalf("handler called %d times, want 1", got)
		}
		if got := f.count(t, f.effects, eventID); got != 1 {
			t.Fatalf("%d effects in the database, want 1", got)
		}
		if got, want := f.inbox.Stats(), (middleware.InboxStats{Processed: 1, Duplicates: 1}); got != want {
			t.Fatalf("stats %+v, want %+v", got, want)
		}
		// Another consumer name processes the same event on its own.
		other, err := middleware.NewInbox(middleware.InboxConfig{DB: f.db, Dialect: d.dialect, Table: f.table, ConsumerName: "shipping"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Handler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error) {
			return nil, f.addEffect(ctx, tx, msg)
		})(eventMsg(eventID, "shipping")); err != nil {
			t.Fatal(err)
		}
		if got := f.count(t, f.effects, eventID); got != 2 {
			t.Fatalf("%d effects after a second consumer handled the event, want 2", got)
		}
	})
}

func TestInboxFailureAfterEffectIsRolledBack(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		var calls atomic.Int32
		h := f.inbox.ConsumerHandler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) error {
			n := calls.Add(1)
			if err := f.addEffect(ctx, tx, msg); err != nil {
				return err
			}
			switch n {
			case 1:
				return errors.New("downstream failed after the effect")
			case 2:
				panic("handler panics after the effect")
			}
			return nil
		})
		eventID := watermill.NewUUID()
		msg := eventMsg(eventID, "payload")
		if err := h(msg); err == nil || !strings.Contains(err.Error(), "downstream failed after the effect") {
			t.Fatalf("first attempt: err %v, want the handler's error", err)
		}
		if e, i := f.count(t, f.effects, eventID), f.count(t, f.table, eventID); e != 0 || i != 0 {
			t.Fatalf("after a failed attempt: %d effects and %d inbox rows, want 0 and 0", e, i)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("second attempt did not panic")
				}
			}()
			_ = h(msg)
		}()
		if e, i := f.count(t, f.effects, eventID), f.count(t, f.table, eventID); e != 0 || i != 0 {
			t.Fatalf("after a panicking attempt: %d effects and %d inbox rows, want 0 and 0", e, i)
		}
		for attempt := 3; attempt <= 4; attempt++ {
			if err := h(msg); err != nil {
				t.Fatalf("attempt %d: %v", attempt, err)
			}
		}
		if got := calls.Load(); got != 3 {
			t.Fatalf("handler called %d times, want 3 (fail, panic, success; the 4th delivery is a duplicate)", got)
		}
		if got := f.count(t, f.effects, eventID); got != 1 {
			t.Fatalf("%d effects, want 1", got)
		}
	})
}

// TestInboxConcurrentDuplicates races several deliveries of one event. On PostgreSQL and MariaDB
// the first handler holds its transaction open until every other delivery is seen blocked on the
// inbox row lock, so the race is not left to chance.
func TestInboxConcurrentDuplicates(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		f := newFixture(t, d)
		const deliveries = 4
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var calls atomic.Int32
		h := f.inbox.Handler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error) {
			calls.Add(1)
			if err := f.addEffect(ctx, tx, msg); err != nil {
				return nil, err
			}
			if d.lockWaiters == nil {
				return nil, nil
			}
			for {
				n, err := d.lockWaiters(ctx, f.db, f.table)
				if err != nil {
					return nil, fmt.Errorf("count lock waiters: %w", err)
				}
				if n == deliveries-1 {
					return nil, nil
				}
				select {
				case <-ctx.Done():
					return nil, fmt.Errorf("%d of %d other deliveries blocked on the inbox row: %w", n, deliveries-1, ctx.Err())
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
		eventID := watermill.NewUUID()
		start := make(chan struct{})
		errs := make(chan error, deliveries)
		var wg sync.WaitGroup
		for i := range deliveries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				msg := eventMsg(eventID, fmt.Sprint("delivery-", i))
				msg.SetContext(ctx)
				<-start
				_, err := h(msg)
				errs <- err
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("delivery failed: %v", err)
			}
		}
		if got := calls.Load(); got != 1 {
			t.Fatalf("handler called %d times for %d concurrent deliveries, want 1", got, deliveries)
		}
		if got := f.count(t, f.effects, eventID); got != 1 {
			t.Fatalf("%d effects, want 1", got)
		}
		if got := f.inbox.Stats(); got.Processed != 1 || got.Duplicates != deliveries-1 {
			t.Fatalf("stats %+v, want 1 processed and %d duplicates", got, deliveries-1)
		}
	})
}

func TestInboxEventID(t *testing.T) {
	db := openSQLite(t)
	inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: middleware.DialectSQLite, ConsumerName: "c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	msg := message.NewMessage("uuid-1", nil)
	if id, err := inbox.EventID(msg); err != nil || id != "uuid-1" {
		t.Fatalf("without event_id metadata: id %q, err %v; want the UUID", id, err)
	}
	msg.Metadata.Set("event_id", "evt-1")
	if id, err := inbox.EventID(msg); err != nil || id != "evt-1" {
		t.Fatalf("with event_id metadata: id %q, err %v; want evt-1", id, err)
	}
	called := false
	h := inbox.Handler(func(context.Context, *sql.Tx, *message.Message) ([]*message.Message, error) {
		called = true
		return nil, nil
	})
	if _, err := h(message.NewMessage("", nil)); !errors.Is(err, middleware.ErrEmptyEventID) || !middleware.IsPermanent(err) || called {
		t.Fatalf("empty id: err %v, handler called %v; want a Permanent ErrEmptyEventID and no call", err, called)
	}
	long := message.NewMessage(strings.Repeat("x", middleware.MaxEventIDLen+1), nil)
	if _, err := h(long); err == nil || !strings.Contains(err.Error(), "at most 255 bytes, got 256") || called {
		t.Fatalf("too long id: err %v, handler called %v", err, called)
	}
}

func TestInboxPruneBefore(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, d database) {
		db := d.open(t)
		table := testsupport.UniqueName("inbox")
		t.Cleanup(func() { dropTables(db, table, table+"_migrations") })
		old := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
		now := old.Add(48 * time.Hour)
		clock := old
		newInbox := func(consumer string) (*middleware.Inbox, message.HandlerFunc) {
			inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: d.dialect, Table: table, ConsumerName: consumer,
				Now: func() time.Time { return clock }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return inbox, inbox.Handler(func(context.Context, *sql.Tx, *message.Message) ([]*message.Message, error) { return nil, nil })
		}
		a, ha := newInbox("a")
		_, hb := newInbox("b")
		if err := a.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := a.Migrate(context.Background()); err != nil {
			t.Fatalf("second Migrate (must be idempotent): %v", err)
		}
		for i := range 5 {
			for _, h := range []message.HandlerFunc{ha, hb} {
				if _, err := h(message.NewMessage(fmt.Sprint("old-", i), nil)); err != nil {
					t.Fatal(err)
				}
			}
		}
		clock = now
		for i := range 3 {
			if _, err := ha(message.NewMessage(fmt.Sprint("new-", i), nil)); err != nil {
				t.Fatal(err)
			}
		}
		deleted, err := a.PruneBefore(context.Background(), now.Add(-time.Hour), 2)
		if err != nil || deleted != 5 {
			t.Fatalf("PruneBefore deleted %d rows, err %v; want 5, nil", deleted, err)
		}
		var remaining, others int
		if err := db.QueryRow("SELECT COUNT(*) FROM " + table + " WHERE consumer_name = 'a'").Scan(&remaining); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("SELECT COUNT(*) FROM " + table + " WHERE consumer_name = 'b'").Scan(&others); err != nil {
			t.Fatal(err)
		}
		if remaining != 3 || others != 5 {
			t.Fatalf("after prune: consumer a has %d rows (want 3 recent), consumer b %d (want 5, untouched)", remaining, others)
		}
		if _, err := a.PruneBefore(context.Background(), now, -1); err == nil || !strings.Contains(err.Error(), "prune limit -1 is negative") {
			t.Fatalf("negative limit: err %v", err)
		}
	})
}

// TestInboxMigrateQualifiedTable migrates a schema.table name on each database.
func TestInboxMigrateQualifiedTable(t *testing.T) {
	schemas := map[middleware.Dialect]string{middleware.DialectPostgres: "public", middleware.DialectMySQL: "outboxkit", middleware.DialectSQLite: "main"}
	forEachDatabase(t, func(t *testing.T, d database) {
		db := d.open(t)
		table := schemas[d.dialect] + "." + testsupport.UniqueName("inbox_qualified")
		t.Cleanup(func() { dropTables(db, table, table+"_migrations") })
		inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: d.dialect, Table: table, ConsumerName: "c"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := inbox.Migrate(context.Background()); err != nil {
				t.Fatalf("Migrate %s: %v", table, err)
			}
		}
		h := inbox.Handler(func(context.Context, *sql.Tx, *message.Message) ([]*message.Message, error) { return nil, nil })
		for range 2 {
			if _, err := h(message.NewMessage("same", nil)); err != nil {
				t.Fatal(err)
			}
		}
		if got := inbox.Stats(); got.Duplicates != 1 {
			t.Fatalf("stats %+v, want 1 duplicate", got)
		}
	})
}

// TestInboxTableNameIsValidated: the inbox checks its table name with outbox.ValidateIdentifier,
// the one identifier validator of outboxkit, and the error names the bad value.
func TestInboxTableNameIsValidated(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range []string{"outboxkit_inbox", "public.Inbox_2", strings.Repeat("a", 48)} {
		if _, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: middleware.DialectSQLite, Table: name, ConsumerName: "c"}, nil); err != nil {
			t.Errorf("table %q rejected: %v", name, err)
		}
	}
	for _, name := range []string{"inbox; DROP TABLE users", "a.b.c", "1inbox", "in-box", `"quoted"`, "inbox.",
		"schéma.inbox", strings.Repeat("a", 49)} {
		_, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: middleware.DialectSQLite, Table: name, ConsumerName: "c"}, nil)
		if !errors.Is(err, outbox.ErrInvalidIdentifier) || !strings.Contains(err.Error(), fmt.Sprintf("InboxConfig.Table: invalid SQL identifier %q", name)) {
			t.Errorf("table %q: error %v, want ErrInvalidIdentifier naming InboxConfig.Table and the value", name, err)
		}
	}
}

func TestInboxConfigValidate(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	valid := middleware.InboxConfig{DB: db, Dialect: middleware.DialectSQLite, ConsumerName: "c"}
	for _, tc := range []struct {
		name    string
		mutate  func(c *middleware.InboxConfig)
		wantErr string
	}{
		{"valid", func(*middleware.InboxConfig) {}, ""},
		{"no db", func(c *middleware.InboxConfig) { c.DB = nil }, "InboxConfig.DB is nil"},
		{"bad dialect", func(c *middleware.InboxConfig) { c.Dialect = "oracle" },
			`InboxConfig.Dialect "oracle" is not supported: want "postgres", "mysql" or "sqlite"`},
		{"bad table", func(c *middleware.InboxConfig) { c.Table = "inbox where 1=1" },
			`InboxConfig.Table: invalid SQL identifier "inbox where 1=1"`},
		{"no consumer", func(c *middleware.InboxConfig) { c.ConsumerName = "" }, "InboxConfig.ConsumerName is empty"},
		{"long consumer", func(c *middleware.InboxConfig) { c.ConsumerName = strings.Repeat("c", 129) },
			"want valid UTF-8 of at most 128 bytes, got 129 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mutate(&c)
			inbox, err := middleware.NewInbox(c, nil)
			if tc.wantErr == "" {
				if err != nil || inbox == nil {
					t.Fatalf("NewInbox: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "invalid inbox config: ") {
				t.Fatalf("NewInbox error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
