package outbox_test

// Tests of plain SQL as a writer (docs/writers.md, DESIGN.md contract line 10): an INSERT from any
// language gets the same key hash, partition, per-key order and validation as outbox.Writer.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

var sqlDialects = []outbox.Dialect{outbox.Postgres, outbox.MySQL}

// newSQLTarget is newTarget, and on PostgreSQL drops the table's functions at the end (dropping
// the table leaves them behind).
func newSQLTarget(t testing.TB, d outbox.Dialect) target {
	t.Helper()
	tg := newTarget(t, d)
	if d == outbox.Postgres {
		t.Cleanup(func() {
			for _, f := range []string{"_key_hash(text, text, text)", "_prepare()", "_notify()"} {
				_, _ = tg.db.Exec("DROP FUNCTION IF EXISTS " + tg.writer.Table().Events() + f + " CASCADE")
			}
		})
	}
	return tg
}

// sqlEvent is one row a plain-SQL writer inserts: the columns of docs/writers.md.
type sqlEvent struct {
	id, topic, aggregateType, aggregateID, eventType, tenant string
	payload                                                  []byte
	headers                                                  string
}

func newSQLEvent(tenant, aggregateType, aggregateID string, n int) sqlEvent {
	return sqlEvent{id: uuid.Must(uuid.NewV7()).String(), topic: "orders.events", aggregateType: aggregateType,
		aggregateID: aggregateID, eventType: "OrderChanged", tenant: tenant,
		payload: fmt.Appendf(nil, `{"key":%q,"n":%d}`, aggregateID, n), headers: `{"content-type":"application/json"}`}
}

// sqlInsert is the plain INSERT of rows events, the statement any language would send.
func (tg target) sqlInsert(rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + tg.writer.Table().Events() +
		" (event_id, topic, aggregate_type, aggregate_id, event_type, payload, headers, tenant_id) VALUES ")
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for c := range 8 {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tg.ph(r*8 + c + 1))
		}
		b.WriteString(")")
	}
	return b.String()
}

// insertSQL inserts events with one plain multi-row INSERT through ex.
func (tg target) insertSQL(ctx context.Context, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, events ...sqlEvent) error {
	args := make([]any, 0, 8*len(events))
	for _, e := range events {
		args = append(args, e.id, e.topic, e.aggregateType, e.aggregateID, e.eventType, e.payload, e.headers, e.tenant)
	}
	_, err := ex.ExecContext(ctx, tg.sqlInsert(len(events)), args...)
	return err
}

// randomKeyPart returns a random string of up to maxBytes UTF-8 bytes mixing ASCII, two-, three-
// and four-byte characters, separators and spaces (never NUL, which PostgreSQL text refuses).
func randomKeyPart(r *rand.Rand, maxBytes int) string {
	alphabet := []string{"a", "Z", "7", "-", " ", "\t", "\x1f", "é", "ß", "Ω", "日", "本", "€", "😀", "𝄞", "ﬁ", "İ"}
	n := r.IntN(maxBytes + 1)
	var b strings.Builder
	for b.Len() < n {
		s := alphabet[r.IntN(len(alphabet))]
		if b.Len()+len(s) > maxBytes {
			break
		}
		b.WriteString(s)
	}
	return b.String()
}

// TestSQLWriterKeyHashMatchesGo: for thousands of random keys (empty and non-empty tenants and
// aggregate types, non-ASCII, up to 255 bytes) a plain INSERT gets the key_hash and partition_no
// outbox.KeyHash and outbox.PartitionOf compute.
func TestSQLWriterKeyHashMatchesGo(t *testing.T) {
	for _, d := range sqlDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newSQLTarget(t, d)
			ctx := context.Background()
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			r := rand.New(rand.NewPCG(uint64(seed), 21))
			const total, perInsert = 3000, 200
			want := map[string]sqlEvent{}
			var batch []sqlEvent
			for i := range total {
				tenant := ""
				if i%2 == 1 {
					tenant = randomKeyPart(r, 40)
				}
				id := randomKeyPart(r, 255)
				if i%7 == 0 {
					id = strings.Repeat("é", 127) + "x" // 255 bytes, 128 characters
				}
				if id == "" {
					id = "k"
				}
				e := newSQLEvent(tenant, randomKeyPart(r, 20), id, i)
				want[e.id] = e
				if batch = append(batch, e); len(batch) == perInsert {
					if err := tg.insertSQL(ctx, tg.db, batch...); err != nil {
						t.Fatalf("plain INSERT: %v", err)
					}
					batch = batch[:0]
				}
			}
			rows, err := tg.db.Query("SELECT event_id, key_hash, partition_no FROM " + tg.writer.Table().Events())
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var id string
				var hash int64
				var partition int
				if err := rows.Scan(&id, &hash, &partition); err != nil {
					t.Fatal(err)
				}
				e := want[id]
				wantHash := outbox.KeyHash(e.tenant, e.aggregateType, e.aggregateID)
				if hash != wantHash || partition != outbox.PartitionOf(wantHash) {
					t.Fatalf("key (%q, %q, %q): database key_hash %d partition %d, Go %d and %d",
						e.tenant, e.aggregateType, e.aggregateID, hash, partition, wantHash, outbox.PartitionOf(wantHash))
				}
				n++
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if n != total {
				t.Fatalf("%d rows, want %d", n, total)
			}
		})
	}
}

// TestSQLWriterAtomicity: a plain INSERT beside a business row is stored if and only if the
// transaction commits.
func TestSQLWriterAtomicity(t *testing.T) {
	for _, d := range sqlDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newSQLTarget(t, d)
			ctx := context.Background()
			write := func(orderID string, commit bool) sqlEvent {
				t.Helper()
				e := newSQLEvent("", "order", orderID, 1)
				tx, err := tg.db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id, total) VALUES (%s, %s)", tg.business, tg.ph(1), tg.ph(2)), orderID, 1); err != nil {
					t.Fatal(err)
				}
				if err := tg.insertSQL(ctx, tx, e); err != nil {
					t.Fatalf("plain INSERT: %v", err)
				}
				if commit {
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
				}
				return e
			}
			committed, rolledBack := write("o-commit", true), write("o-rollback", false)
			ids := tg.eventIDs(t)
			if !ids[committed.id] || ids[rolledBack.id] || len(ids) != 1 {
				t.Fatalf("stored %v, want only the committed event %s", ids, committed.id)
			}
		})
	}
}

// heldWrite is one writer's transaction on its own connection, kept open until commit.
type heldWrite struct {
	tx  *sql.Tx
	pid int64 // the session: pg_backend_pid() or CONNECTION_ID()
}

func (tg target) beginHeld(t *testing.T, ctx context.Context) heldWrite {
	t.Helper()
	conn, err := tg.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	q := "SELECT pg_backend_pid()"
	if tg.dialect == outbox.MySQL {
		q = "SELECT CONNECTION_ID()"
	}
	var pid int64
	if err := tx.QueryRowContext(ctx, q).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return heldWrite{tx: tx, pid: pid}
}

// waitUntilBlocked waits until the session pid waits for a lock. PostgreSQL names the sessions
// that block it. On MariaDB, InnoDB's status lists the session's transaction in LOCK WAIT (a row
// lock wait inside the writers' trigger included, which information_schema.innodb_trx leaves out
// when the transaction queues behind another waiter: seen on MariaDB 10.11), and the process list
// names a wait on a table or metadata lock in the session's state. Neither looks at how long a
// statement has run.
func (tg target) waitUntilBlocked(t *testing.T, pid int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for {
		blocked, err := tg.blocked(pid)
		if err != nil {
			t.Fatal(err)
		}
		if blocked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d never waited for a lock: the writers of one key do not serialize", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blocked reports whether the session pid waits for a lock now.
func (tg target) blocked(pid int64) (bool, error) {
	if tg.dialect != outbox.MySQL {
		var blocked bool
		err := tg.db.QueryRow("SELECT cardinality(pg_blocking_pids($1::int)) > 0", pid).Scan(&blocked)
		return blocked, err
	}
	var waits bool
	if err := tg.db.QueryRow("SELECT EXISTS (SELECT 1 FROM information_schema.processlist WHERE id = ? "+
		"AND state LIKE 'Waiting for%lock%')", pid).Scan(&waits); err != nil || waits {
		return waits, err
	}
	var typ, name, status string
	if err := tg.db.QueryRow("SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return false, fmt.Errorf("innodb status: %w", err)
	}
	return innodbLockWait(status, pid), nil
}

// innodbLockWait reports whether SHOW ENGINE INNODB STATUS lists a transaction of session pid
// waiting for a lock: its entry in the TRANSACTIONS section ("---TRANSACTION …") has a
// "LOCK WAIT" line and names the session as "MariaDB thread id <pid>,".
func innodbLockWait(status string, pid int64) bool {
	thread := fmt.Sprintf(" thread id %d,", pid)
	for _, trx := range strings.Split(status, "---TRANSACTION ")[1:] {
		if strings.Contains(trx, thread) && strings.Contains(trx, "\nLOCK WAIT ") {
			return true
		}
	}
	return false
}

// seqOf returns the seq of the event.
func (tg target) seqOf(t *testing.T, eventID string) int64 {
	t.Helper()
	var seq int64
	if err := tg.db.QueryRow("SELECT seq FROM "+tg.writer.Table().Events()+" WHERE event_id = "+tg.ph(1), eventID).Scan(&seq); err != nil {
		t.Fatalf("seq of event %s: %v", eventID, err)
	}
	return seq
}

// TestSQLWriterTakesItsSeqAfterTheKeyLock: with a transaction holding key K open, a Go writer
// queues for K, then a plain INSERT of K queues behind it. The Go writer commits first, so its
// event must have the lower seq; a trigger that kept the seq drawn before it waited (PostgreSQL
// evaluates the seq default before BEFORE triggers) would give the plain INSERT the lower one.
// Each key is tried with ASCII and non-ASCII ids and a tenant, so Go and the database must also
// derive the same lock from the key.
func TestSQLWriterTakesItsSeqAfterTheKeyLock(t *testing.T) {
	for _, d := range sqlDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newSQLTarget(t, d)
			ctx := context.Background()
			for _, key := range []struct{ tenant, id string }{{"", "order-1"}, {"acme", "заказ-日本-😀"}} {
				holder := tg.beginHeld(t, ctx)
				first := newSQLEvent(key.tenant, "order", key.id, 0)
				if err := tg.insertSQL(ctx, holder.tx, first); err != nil {
					t.Fatalf("plain INSERT: %v", err)
				}
				goWriter, sqlWriter := tg.beginHeld(t, ctx), tg.beginHeld(t, ctx)
				goEvent := orderEvent(key.id, 1)
				goEvent.TenantID = key.tenant
				goDone := make(chan error, 1)
				go func() {
					if err := tg.writer.WriteTx(ctx, goWriter.tx, goEvent); err != nil {
						goDone <- err
						return
					}
					goDone <- goWriter.tx.Commit()
				}()
				tg.waitUntilBlocked(t, goWriter.pid)
				sqlEv := newSQLEvent(key.tenant, "order", key.id, 2)
				sqlDone := tg.commitInBackground(ctx, sqlWriter, sqlEv)
				tg.waitUntilBlocked(t, sqlWriter.pid)
				if err := holder.tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := <-goDone; err != nil {
					t.Fatalf("Go writer: %v", err)
				}
				if err := <-sqlDone; err != nil {
					t.Fatalf("SQL writer: %v", err)
				}
				s0, s1, s2 := tg.seqOf(t, first.id), tg.seqOf(t, goEvent.ID.String()), tg.seqOf(t, sqlEv.id)
				if !(s0 < s1 && s1 < s2) {
					t.Fatalf("key %q/%q: seqs %d (first commit), %d (Go, second), %d (SQL, third), want increasing",
						key.tenant, key.id, s0, s1, s2)
				}
			}
		})
	}
}

// TestSQLAndGoWritersKeepPerKeyCommitOrder: concurrent writers, half plain SQL, half
// outbox.Writer, write events of a few keys in transactions held open for a random time. Each
// transaction's last statement increments its key's witness row, whose lock is held to the
// commit: the witness numbers are the commit order per key. Seq order per key must equal it.
func TestSQLAndGoWritersKeepPerKeyCommitOrder(t *testing.T) {
	for _, d := range sqlDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newSQLTarget(t, d)
			ctx := context.Background()
			witness, log := tg.business+"_w", tg.business+"_log"
			for _, stmt := range []string{
				"CREATE TABLE " + witness + " (k VARCHAR(64) PRIMARY KEY, n INT NOT NULL)" + tg.utf8(),
				"CREATE TABLE " + log + " (event_id " + tg.uuidType() + " PRIMARY KEY, k VARCHAR(64) NOT NULL, n INT NOT NULL)" + tg.utf8(),
			} {
				if _, err := tg.db.Exec(stmt); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { _, _ = tg.db.Exec("DROP TABLE IF EXISTS " + witness + ", " + log) })
			keys := []string{"k-ascii", "k-é", "k-日本", "k-😀"}
			for _, k := range keys {
				if _, err := tg.db.Exec("INSERT INTO "+witness+" (k, n) VALUES ("+tg.ph(1)+", 0)", k); err != nil {
					t.Fatal(err)
				}
			}
			const workers, rounds = 8, 25
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
					for range rounds {
						if err := tg.orderedWrite(ctx, r, w%2 == 0, keys[r.IntN(len(keys))], witness, log); err != nil {
							errs <- fmt.Errorf("worker %d: %w", w, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			tg.checkSeqIsCommitOrder(t, log, workers*rounds)
		})
	}
}

// orderedWrite writes one or two events of key, by plain SQL or through outbox.Writer, holds the
// transaction open for a while, then records the commit order in the witness row and commits.
func (tg target) orderedWrite(ctx context.Context, r *rand.Rand, plainSQL bool, key, witness, log string) error {
	tx, err := tg.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	events := 1 + r.IntN(2)
	var ids []string
	if plainSQL {
		var batch []sqlEvent
		for i := range events {
			batch = append(batch, newSQLEvent("t1", "order", key, i))
			ids = append(ids, batch[i].id)
		}
		if err := tg.insertSQL(ctx, tx, batch...); err != nil {
			return fmt.Errorf("plain INSERT: %w", err)
		}
	} else {
		var batch []outbox.Event
		for i := range events {
			e := orderEvent(key, i)
			e.TenantID = "t1"
			batch = append(batch, e)
			ids = append(ids, e.ID.String())
		}
		if err := tg.writer.WriteTx(ctx, tx, batch...); err != nil {
			return err
		}
	}
	time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
	if _, err := tx.ExecContext(ctx, "UPDATE "+witness+" SET n = n + 1 WHERE k = "+tg.ph(1), key); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT n FROM "+witness+" WHERE k = "+tg.ph(1), key).Scan(&n); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+log+" (event_id, k, n) VALUES ("+tg.ph(1)+", "+tg.ph(2)+", "+tg.ph(3)+")", id, key, n); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// checkSeqIsCommitOrder reads the events of each key in seq order and fails if a later seq has
// an earlier commit (witness) number.
func (tg target) checkSeqIsCommitOrder(t *testing.T, log string, transactions int) {
	t.Helper()
	rows, err := tg.db.Query("SELECT l.k, l.n, e.seq FROM " + log + " l JOIN " + tg.writer.Table().Events() +
		" e ON e.event_id = l.event_id ORDER BY e.seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[string]int{}
	commits := map[string]bool{}
	for rows.Next() {
		var k string
		var n int
		var seq int64
		if err := rows.Scan(&k, &n, &seq); err != nil {
			t.Fatal(err)
		}
		if n < last[k] {
			t.Fatalf("key %s: seq %d belongs to commit %d, after an event of commit %d: seq order is not commit order", k, seq, n, last[k])
		}
		last[k] = n
		commits[fmt.Sprint(k, n)] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(commits) != transactions {
		t.Fatalf("%d transactions found in the outbox, want %d", len(commits), transactions)
	}
}

// TestSQLWriterErrors: each mistake a plain-SQL writer can make is refused by the database with
// an error naming the column, and outbox.Writer refuses the same event (the rules agree).
func TestSQLWriterErrors(t *testing.T) {
	long := strings.Repeat("é", 128) // 256 bytes
	cases := []struct {
		name    string
		edit    func(*sqlEvent)
		goEdit  func(*outbox.Event) // nil: SQL only (the Go API cannot express it)
		message string
	}{
		{"empty topic", func(e *sqlEvent) { e.topic = "" }, func(e *outbox.Event) { e.Topic = "" }, "outboxkit: topic must not be empty"},
		{"bad topic", func(e *sqlEvent) { e.topic = "orders events" }, func(e *outbox.Event) { e.Topic = "orders events" }, "outboxkit: topic"},
		{"non-ASCII topic", func(e *sqlEvent) { e.topic = "ordérs" }, func(e *outbox.Event) { e.Topic = "ordérs" }, "outboxkit: topic"},
		{"empty aggregate_id", func(e *sqlEvent) { e.aggregateID = "" }, func(e *outbox.Event) { e.AggregateID = "" }, "outboxkit: aggregate_id must not be empty"},
		{"long aggregate_id", func(e *sqlEvent) { e.aggregateID = long }, func(e *outbox.Event) { e.AggregateID = long }, "outboxkit: aggregate_id is 256 bytes"},
		{"long tenant_id", func(e *sqlEvent) { e.tenant = long }, func(e *outbox.Event) { e.TenantID = long }, "outboxkit: tenant_id is 256 bytes"},
		{"empty event_type", func(e *sqlEvent) { e.eventType = "" }, func(e *outbox.Event) { e.EventType = "" }, "outboxkit: event_type must not be empty"},
		{"reserved header", func(e *sqlEvent) { e.headers = `{"event_id":"x"}` }, func(e *outbox.Event) { e.Headers = map[string]string{"event_id": "x"} }, "outboxkit: header \"event_id\" is reserved"},
		{"reserved header prefix", func(e *sqlEvent) { e.headers = `{"outbox_attempts":"1"}` }, func(e *outbox.Event) { e.Headers = map[string]string{"outbox_attempts": "1"} }, "outboxkit: header \"outbox_attempts\" is reserved"},
		{"bad header name", func(e *sqlEvent) { e.headers = `{"a b":"x"}` }, func(e *outbox.Event) { e.Headers = map[string]string{"a b": "x"} }, "outboxkit: header name \"a b\""},
		{"headers too large", func(e *sqlEvent) { e.headers = `{"big":"` + strings.Repeat("x", outbox.MaxHeadersBytes) + `"}` },
			func(e *outbox.Event) {
				e.Headers = map[string]string{"big": strings.Repeat("x", outbox.MaxHeadersBytes)}
			}, "outboxkit: headers are 65539 bytes"},
		{"header not a string", func(e *sqlEvent) { e.headers = `{"n":1}` }, nil, "outboxkit: header \"n\" must be a JSON string"},
		{"headers not an object", func(e *sqlEvent) { e.headers = `["a"]` }, nil, "outboxkit: headers must be a JSON object"},
		{"nil event_id", func(e *sqlEvent) { e.id = uuid.Nil.String() }, nil, "outboxkit: event_id must not be the nil UUID"},
	}
	for _, d := range sqlDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newSQLTarget(t, d)
			ctx := context.Background()
			for _, c := range cases {
				e := newSQLEvent("", "order", "o-1", 1)
				c.edit(&e)
				err := tg.insertSQL(ctx, tg.db, e)
				if err == nil || !strings.Contains(err.Error(), c.message) {
					t.Errorf("%s: database error %v, want one containing %q", c.name, err, c.message)
				}
				if c.goEdit != nil {
					ge := orderEvent("o-1", 1)
					c.goEdit(&ge)
					if err := ge.Validate(outbox.DefaultMaxPayloadBytes); err == nil {
						t.Errorf("%s: the database refuses it, Go's Validate accepts it", c.name)
					}
				}
			}
			if d == outbox.MySQL {
				e := newSQLEvent("", "order", "o-1", 1)
				e.id = "not-a-uuid"
				if err := tg.insertSQL(ctx, tg.db, e); err == nil || !strings.Contains(err.Error(), "outboxkit: event_id") {
					t.Errorf("bad event id: database error %v, want one naming event_id", err)
				}
			}
			if ids := tg.eventIDs(t); len(ids) != 0 {
				t.Fatalf("%d refused events were stored", len(ids))
			}
		})
	}
}

// TestSQLWriterDefaults: a plain INSERT of only the required columns (no event id, tenant,
// headers or created_at) gets a generated event id, an empty tenant, empty headers and the
// current time, like an event written by outbox.Writer with those fields zero.
func TestSQLWriterDefaults(t *testing.T) {
	for _, d := range sqlDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newSQLTarget(t, d)
			before := time.Now().Add(-time.Second)
			if _, err := tg.db.Exec("INSERT INTO " + tg.writer.Table().Events() +
				" (topic, aggregate_type, aggregate_id, event_type, payload) VALUES ('orders.events', 'order', 'o-9', 'OrderPlaced', '{}')"); err != nil {
				t.Fatalf("minimal plain INSERT: %v", err)
			}
			got := tg.rows(t)
			if len(got) != 1 {
				t.Fatalf("%d rows, want 1", len(got))
			}
			r := got[0]
			if _, err := uuid.Parse(r.EventID); err != nil || r.EventID != strings.ToLower(r.EventID) {
				t.Errorf("event_id %q, want a generated lower-case UUID", r.EventID)
			}
			if r.TenantID != "" || r.Headers != "{}" || string(r.Payload) != "{}" || r.KeyHash != outbox.KeyHash("", "order", "o-9") {
				t.Errorf("row %+v, want an empty tenant, {} headers, payload {} and Go's key hash", r)
			}
			created, get := outbox.TimeScanner()
			if err := tg.db.QueryRow("SELECT created_at FROM " + tg.writer.Table().Events()).Scan(created); err != nil {
				t.Fatal(err)
			}
			at, err := get()
			if err != nil {
				t.Fatal(err)
			}
			if at.Before(before) || at.After(time.Now().Add(time.Second)) {
				t.Errorf("created_at %s, want about now (%s) in UTC", at, time.Now().UTC())
			}
		})
	}
}

// utf8 is the table option a MySQL test table needs to hold any key.
func (tg target) utf8() string {
	if tg.dialect == outbox.MySQL {
		return " DEFAULT CHARSET=utf8mb4"
	}
	return ""
}

// uuidType is the column type of an event id in the dialect's outbox table.
func (tg target) uuidType() string {
	if tg.dialect == outbox.Postgres {
		return "UUID"
	}
	return "CHAR(36)"
}

// TestMultiKeyInsert: transaction A holds key K2, C queues for K2, then B inserts (K1, K2) in
// one multi-row INSERT, so B's K2 row commits after C's event. On PostgreSQL each row draws its
// seq under its own key's lock, so B's K2 row gets the higher seq. On MariaDB this pins the limit
// docs/writers.md states: a multi-row INSERT reserves the AUTO_INCREMENT values of all its rows
// when its first row is written, so B's K2 row gets the lower seq. (If the MariaDB case fails,
// MariaDB now orders multi-key INSERTs too and the docs should say so.)
func TestMultiKeyInsert(t *testing.T) {
	for _, d := range sqlDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newSQLTarget(t, d)
			ctx := context.Background()
			a := tg.beginHeld(t, ctx)
			if err := tg.insertSQL(ctx, a.tx, newSQLEvent("", "order", "K2", 0)); err != nil {
				t.Fatal(err)
			}
			c, ce := tg.beginHeld(t, ctx), newSQLEvent("", "order", "K2", 1)
			cDone := tg.commitInBackground(ctx, c, ce)
			tg.waitUntilBlocked(t, c.pid)
			b, b1, b2 := tg.beginHeld(t, ctx), newSQLEvent("", "order", "K1", 0), newSQLEvent("", "order", "K2", 2)
			bDone := tg.commitInBackground(ctx, b, b1, b2)
			tg.waitUntilBlocked(t, b.pid)
			if err := a.tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(<-cDone, <-bDone); err != nil {
				t.Fatal(err)
			}
			cSeq, bSeq := tg.seqOf(t, ce.id), tg.seqOf(t, b2.id)
			switch {
			case d == outbox.Postgres && bSeq < cSeq:
				t.Fatalf("K2: seq %d (committed second), %d (committed third, second row of a multi-key INSERT): not commit order", cSeq, bSeq)
			case d == outbox.MySQL && bSeq > cSeq:
				t.Fatalf("K2: seq %d (committed second), %d (committed third, second row of a multi-key INSERT): "+
					"MariaDB now orders it, update docs/writers.md", cSeq, bSeq)
			}
		})
	}
}

// commitInBackground inserts events by plain SQL in w's transaction and commits it, in a
// goroutine; the channel reports the result.
func (tg target) commitInBackground(ctx context.Context, w heldWrite, events ...sqlEvent) <-chan error {
	done := make(chan error, 1)
	go func() {
		if err := tg.insertSQL(ctx, w.tx, events...); err != nil {
			done <- err
			return
		}
		done <- w.tx.Commit()
	}()
	return done
}
