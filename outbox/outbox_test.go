package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// target is one real database with a fresh outbox table and a business table.
type target struct {
	dialect  outbox.Dialect
	db       *sql.DB
	writer   *outbox.Writer
	business string
}

func (tg target) ph(n int) string {
	if tg.dialect == outbox.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// WAL once, on one connection: it persists in the file. As a DSN pragma, every new
	// connection switched the journal mode, and connections opened at once could fail with
	// SQLITE_BUSY at connect (TestConcurrentMigrate, seen in CI).
	if _, err := db.Exec("PRAGMA journal_mode=WAL"); err != nil {
		t.Fatal(err)
	}
	return db
}

// newTarget migrates a uniquely named outbox table and creates a business table beside it.
func newTarget(t testing.TB, dialect outbox.Dialect) target {
	t.Helper()
	var db *sql.DB
	switch dialect {
	case outbox.Postgres:
		db = testsupport.OpenPostgres(t)
	case outbox.MySQL:
		db = testsupport.OpenMySQL(t)
	case outbox.SQLite:
		db = openSQLite(t)
	}
	name := testsupport.UniqueName("outbox")
	w, err := outbox.NewWriter(outbox.Config{Dialect: dialect, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	business := name + "_orders"
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+business+" (id VARCHAR(64) PRIMARY KEY, total INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tbl := range []string{business, w.Table().Events(), w.Table().Leases(), w.Table().Relays(),
			w.Table().Migrations(), w.Table().KeyLocks()} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tbl)
		}
	})
	return target{dialect: dialect, db: db, writer: w, business: business}
}

var allDialects = []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite}

func orderEvent(orderID string, n int) outbox.Event {
	e, _ := outbox.NewJSONEvent("orders.events", "order", orderID, "OrderPlaced", map[string]int{"n": n})
	e.ID = uuid.Must(uuid.NewV7())
	return e
}

// placeOrder writes a business row and its events in one transaction and commits or rolls back.
func (tg target) placeOrder(ctx context.Context, orderID string, commit bool, events ...outbox.Event) error {
	tx, err := tg.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id, total) VALUES (%s, %s)", tg.business, tg.ph(1), tg.ph(2)), orderID, 42); err != nil {
		return fmt.Errorf("business insert: %w", err)
	}
	if err := tg.writer.WriteTx(ctx, tx, events...); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback()
	}
	return tx.Commit()
}

func (tg target) eventIDs(t testing.TB) map[string]bool {
	t.Helper()
	rows, err := tg.db.Query("SELECT event_id FROM " + tg.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if ids[id] {
			t.Fatalf("event %s stored twice", id)
		}
		ids[id] = true
	}
	return ids
}

func TestAtomicity(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := context.Background()

			committed := []outbox.Event{orderEvent("o1", 1), orderEvent("o1", 2)}
			if err := tg.placeOrder(ctx, "o1", true, committed...); err != nil {
				t.Fatalf("commit: %v", err)
			}
			rolledBack := orderEvent("o2", 1)
			if err := tg.placeOrder(ctx, "o2", false, rolledBack); err != nil {
				t.Fatalf("rollback path: %v", err)
			}
			// A business failure after the outbox insert rolls back both.
			failing := orderEvent("o3", 1)
			tx, err := tg.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tg.writer.WriteTx(ctx, tx, failing); err != nil {
				t.Fatal(err)
			}
			_, dupErr := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id, total) VALUES (%s, %s)", tg.business, tg.ph(1), tg.ph(2)), "o1", 1)
			if dupErr == nil {
				t.Fatal("duplicate business key accepted")
			}
			_ = tx.Rollback()

			ids := tg.eventIDs(t)
			if len(ids) != 2 || !ids[committed[0].ID.String()] || !ids[committed[1].ID.String()] {
				t.Fatalf("stored events %v, want exactly the 2 committed ones", ids)
			}
			if ids[rolledBack.ID.String()] || ids[failing.ID.String()] {
				t.Fatal("a rolled-back event was stored")
			}
			var orders int
			if err := tg.db.QueryRow("SELECT COUNT(*) FROM " + tg.business).Scan(&orders); err != nil {
				t.Fatal(err)
			}
			if orders != 1 {
				t.Fatalf("business rows = %d, want 1", orders)
			}
		})
	}
}

func TestConcurrentWriters(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := context.Background()
			const writers, perWriter = 8, 25
			var mu sync.Mutex
			want := map[string]bool{}
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWriter {
						id := fmt.Sprintf("w%d-%d", w, i)
						events := []outbox.Event{orderEvent(id, 1), orderEvent(fmt.Sprintf("shared-%d", i%5), 2)}
						commit := i%4 != 0
						if err := tg.placeOrder(ctx, id, commit, events...); err != nil {
							errs <- fmt.Errorf("writer %d tx %d: %w", w, i, err)
							return
						}
						if commit {
							mu.Lock()
							for _, e := range events {
								want[e.ID.String()] = true
							}
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got := tg.eventIDs(t)
			if len(got) != len(want) {
				t.Fatalf("stored %d events, committed %d", len(got), len(want))
			}
			for id := range want {
				if !got[id] {
					t.Fatalf("committed event %s missing", id)
				}
			}
		})
	}
}

// row is everything the writer stores for an event, read back for comparison.
type row struct {
	EventID, Topic, AggregateType, AggregateID, EventType, TenantID, Headers string
	Payload                                                                  []byte
	KeyHash                                                                  int64
	Partition                                                                int
}

func (tg target) rows(t testing.TB) []row {
	t.Helper()
	rs, err := tg.db.Query("SELECT event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, headers, payload, key_hash, partition_no FROM " +
		tg.writer.Table().Events() + " ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.EventID, &r.Topic, &r.AggregateType, &r.AggregateID, &r.EventType, &r.TenantID, &r.Headers,
			&r.Payload, &r.KeyHash, &r.Partition); err != nil {
			t.Fatal(err)
		}
		r.Headers = strings.ReplaceAll(r.Headers, " ", "")
		out = append(out, r)
	}
	return out
}

func TestWatermillPublisherWritesSameRowsAsTypedAPI(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			typed, raw := newTarget(t, d), newTarget(t, d)
			ctx := context.Background()
			events := []outbox.Event{orderEvent("o1", 1), orderEvent("o2", 2)}
			events[1].TenantID = "acme"
			events[1].Headers["traceparent"] = "00-abc-def-01"
			for i := range events {
				events[i].ID = uuid.Must(uuid.NewV7())
				events[i].CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			}
			tx, err := typed.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := typed.writer.WriteTx(ctx, tx, events...); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}

			tx, err = raw.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := raw.writer.Publisher(wsql.TxFromStdSQL(tx))
			if err != nil {
				t.Fatal(err)
			}
			var msgs []*message.Message
			for _, e := range events {
				msgs = append(msgs, e.ToMessage())
			}
			if err := pub.Publish("orders.events", msgs...); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			a, b := typed.rows(t), raw.rows(t)
			if fmt.Sprint(a) != fmt.Sprint(b) || len(a) != 2 {
				t.Fatalf("typed path rows:\n%v\nwatermill path rows:\n%v", a, b)
			}
			if a[1].TenantID != "acme" || !strings.Contains(a[1].Headers, `"traceparent":"00-abc-def-01"`) {
				t.Fatalf("tenant or headers not stored: %+v", a[1])
			}
			if want := outbox.KeyHash("acme", "order", "o2"); a[1].KeyHash != want || a[1].Partition != outbox.PartitionOf(want) {
				t.Fatalf("key hash %d partition %d, want %d %d", a[1].KeyHash, a[1].Partition, want, outbox.PartitionOf(want))
			}
		})
	}
}

func TestValidationErrorsLeaveTransactionUsable(t *testing.T) {
	valid := orderEvent("o1", 1)
	cases := []struct {
		name   string
		mutate func(*outbox.Event)
		want   string
	}{
		{"missing topic", func(e *outbox.Event) { e.Topic = "" }, "missing topic"},
		{"missing aggregate id", func(e *outbox.Event) { e.AggregateID = "" }, "missing aggregate id"},
		{"missing event type", func(e *outbox.Event) { e.EventType = "" }, "missing event type"},
		{"oversized payload", func(e *outbox.Event) { e.Payload = make([]byte, 2048) }, "payload is 2048 bytes, the limit is 1024"},
		{"header with space", func(e *outbox.Event) { e.Headers["bad name"] = "x" }, `header name "bad name"`},
		{"empty header name", func(e *outbox.Event) { e.Headers[""] = "x" }, `header name ""`},
		{"reserved header", func(e *outbox.Event) { e.Headers["event_id"] = "x" }, `header "event_id" is reserved`},
		{"topic with quote", func(e *outbox.Event) { e.Topic = "orders'; DROP TABLE x;--" }, "may only contain"},
		{"long aggregate id", func(e *outbox.Event) { e.AggregateID = strings.Repeat("a", 256) }, "aggregate id is 256 bytes"},
		{"created at beyond year 9999", func(e *outbox.Event) { e.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "the year must be between 1 and 9999"},
	}
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			w, err := outbox.NewWriter(outbox.Config{Dialect: d, Table: tg.writer.Table().Events(), MaxPayloadBytes: 1024})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			tx, err := tg.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			for _, tc := range cases {
				e := valid
				e.ID = uuid.Nil
				e.Headers = map[string]string{}
				tc.mutate(&e)
				err := w.WriteTx(ctx, tx, orderEvent("fine", 1), e)
				if !errors.Is(err, outbox.ErrInvalidEvent) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: error %v, want ErrInvalidEvent containing %q", tc.name, err, tc.want)
				}
			}
			// Nothing ran, so the transaction still works.
			if err := w.WriteTx(ctx, tx, orderEvent("after", 1)); err != nil {
				t.Fatalf("transaction unusable after validation errors: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if n := len(tg.eventIDs(t)); n != 1 {
				t.Fatalf("stored %d events, want 1 (only the valid write)", n)
			}
		})
	}
}

func TestTableNamesAreValidated(t *testing.T) {
	for _, name := range []string{`outbox"; DROP TABLE users; --`, "out box", "outbox;", "o'x", "1outbox", "a.b.c",
		strings.Repeat("x", 49), "outbox-events"} {
		if _, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: name}); !errors.Is(err, outbox.ErrInvalidIdentifier) ||
			!strings.Contains(err.Error(), "Config.Table") {
			t.Errorf("table %q: error %v, want ErrInvalidIdentifier naming Config.Table", name, err)
		}
	}
	for _, name := range []string{"outbox", "app.outbox_events", "_x1"} {
		if _, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: name}); err != nil {
			t.Errorf("table %q rejected: %v", name, err)
		}
	}
	if _, err := outbox.NewWriter(outbox.Config{Dialect: "oracle"}); err == nil || !strings.Contains(err.Error(), `"oracle"`) {
		t.Errorf("unknown dialect: error %v, want it named", err)
	}
	if _, err := outbox.NewWriter(outbox.Config{}); err == nil || !strings.Contains(err.Error(), "Config.Dialect is required") {
		t.Errorf("missing dialect: error %v", err)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			for range 2 {
				if err := outbox.Migrate(context.Background(), tg.db, tg.writer.Table()); err != nil {
					t.Fatalf("re-running migrations: %v", err)
				}
			}
			var leases, versions int
			if err := tg.db.QueryRow("SELECT COUNT(*) FROM " + tg.writer.Table().Leases()).Scan(&leases); err != nil {
				t.Fatal(err)
			}
			if err := tg.db.QueryRow("SELECT COUNT(*) FROM " + tg.writer.Table().Migrations()).Scan(&versions); err != nil {
				t.Fatal(err)
			}
			migrations, err := outbox.Migrations(tg.writer.Table())
			if err != nil {
				t.Fatal(err)
			}
			if leases != 0 || versions != len(migrations) {
				t.Fatalf("leases=%d versions=%d, want 0 (forwarders create their own) and %d", leases, versions, len(migrations))
			}
		})
	}
}

// TestSameKeyTransactionsSerialize: a transaction writing an event of a key waits for an open
// transaction that wrote the same key, so sequence order is commit order.
func TestSameKeyTransactionsSerialize(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := context.Background()
			first, err := tg.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = first.Rollback() }()
			a := orderEvent("same", 1)
			if err := tg.writer.WriteTx(ctx, first, a); err != nil {
				t.Fatal(err)
			}
			other := orderEvent("other", 1)
			if err := tg.placeOrder(ctx, "x-other", true, other); err != nil {
				t.Fatalf("a different key must not wait: %v", err)
			}
			done := make(chan error, 1)
			b := orderEvent("same", 2)
			go func() { done <- tg.placeOrder(ctx, "x-same", true, b) }()
			select {
			case err := <-done:
				t.Fatalf("second transaction on the same key committed while the first was open (err=%v)", err)
			case <-time.After(500 * time.Millisecond):
			}
			if err := first.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			var seqA, seqB int64
			q := "SELECT seq FROM " + tg.writer.Table().Events() + " WHERE event_id = " + tg.ph(1)
			if err := tg.db.QueryRow(q, a.ID.String()).Scan(&seqA); err != nil {
				t.Fatal(err)
			}
			if err := tg.db.QueryRow(q, b.ID.String()).Scan(&seqB); err != nil {
				t.Fatal(err)
			}
			if seqA >= seqB {
				t.Fatalf("seq of first commit %d >= seq of second %d", seqA, seqB)
			}
		})
	}
}
