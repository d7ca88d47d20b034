package forwarder

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The store's acknowledgements and lease locks under concurrency: which rows a statement locks
// or waits for on MariaDB, the cdc source's one-statement acknowledgement, and what a retained
// acknowledgement leaves in the row.

// On MariaDB, a statement that locks lease rows must lock only the rows it names. With the
// partitions as an IN list, the optimizer scanned the whole lease group once half of it was
// listed, and InnoDB waits for the lock of every row it scans, even one it then drops: an
// acknowledgement holding its own row 10 and waiting for another relay's row 15, while that
// relay's acknowledgement held row 15 and waited for row 20, deadlocked (Error 1213 in
// TestPausedRelayLosesItsPartitions). Here relay A holds one lease row and relay B, whose
// lock wait is cut to 1 s, locks, renews and releases 31 others: none of it may wait for A.
func TestStoreLeaseLocksTakeOnlyTheNamedRows(t *testing.T) {
	fx := newStoreFixture(t, outbox.MySQL)
	if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
		t.Fatal(err)
	}
	impatient := impatientMySQL(t)
	var others []int
	for p := range 32 {
		if p != 10 {
			others = append(others, p)
		}
	}
	if _, err := fx.db.Exec("UPDATE " + fx.store.Table.Leases() + " SET owner = 'B', expires_at = NOW(6) + INTERVAL 1 HOUR WHERE partition_no <> 10"); err != nil {
		t.Fatal(err)
	}
	fx.holdRowLock("SELECT partition_no FROM " + fx.store.Table.Leases() + " WHERE lease_group = 'default' AND partition_no = 10 FOR UPDATE")
	err := fx.store.InLeaseTx(fx.ctx, impatient, func(tx *sql.Tx) error {
		locked, err := fx.store.LockLeases(fx.ctx, tx, others, false)
		if err == nil && len(locked) != len(others) {
			err = fmt.Errorf("locked %d rows, want %d", len(locked), len(others))
		}
		return err
	})
	if err != nil {
		t.Fatalf("locking 31 lease rows waited for the one another transaction holds: %v", err)
	}
	if _, err := fx.store.Renew(fx.ctx, impatient, "B", time.Hour); err != nil {
		t.Fatalf("renewing B's leases waited for A's row: %v", err)
	}
	if n, err := fx.store.Release(fx.ctx, impatient, "B", others); err != nil || n != len(others) {
		t.Fatalf("releasing B's leases: %d released, %v", n, err)
	}
}

// The same for the acknowledgement's DELETE on MariaDB: with the batch's seqs as an IN list
// (half of the table or more, the steady state of a relay that keeps up) it scanned the whole
// table and waited for a row another transaction held, while holding the batch's lease rows.
func TestStoreAckDeletesOnlyTheNamedRows(t *testing.T) {
	fx := newStoreFixture(t, outbox.MySQL)
	for i := range 200 {
		fx.write(fmt.Sprintf("order-%d", i), 16)
	}
	recs := fx.claim(200, 1<<30)
	if len(recs) != 200 {
		t.Fatalf("claimed %d rows, want 200", len(recs))
	}
	held := recs[100].Seq
	var seqs []int64
	for i, r := range recs {
		if i%2 == 0 && r.Seq != held {
			seqs = append(seqs, r.Seq)
		}
	}
	fx.holdRowLock(fmt.Sprintf("SELECT seq FROM %s WHERE seq = %d FOR UPDATE", fx.store.Table.Events(), held))
	if err := fx.store.InLeaseTx(fx.ctx, impatientMySQL(t), func(tx *sql.Tx) error { return fx.store.Ack(fx.ctx, tx, seqs, false) }); err != nil {
		t.Fatalf("deleting %d acknowledged rows waited for a row another transaction holds: %v", len(seqs), err)
	}
	var left int
	if err := fx.db.QueryRow("SELECT COUNT(*) FROM " + fx.store.Table.Events()).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 200-len(seqs) {
		t.Fatalf("%d rows left after deleting %d of 200", left, len(seqs))
	}
}

// impatientMySQL opens the test MariaDB with a lock wait of 1 s: a statement that waits for a
// row lock fails with Error 1205 instead of hanging.
func impatientMySQL(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testsupport.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// holdRowLock runs the locking query in a transaction of its own that stays open until the test
// ends, and fails the test unless it locked one row.
func (fx *storeFixture) holdRowLock(query string) {
	fx.t.Helper()
	tx, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.t.Cleanup(func() { _ = tx.Rollback() })
	rows, err := tx.QueryContext(fx.ctx, query)
	if err != nil {
		fx.t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil || n != 1 {
		fx.t.Fatalf("hold a row lock: %d rows, %v", n, err)
	}
}

// TestStoreAckFencedDeletesOnlyOwnedPartitions: the cdc source's one-statement acknowledgement
// fences like fence does. Rows of a partition whose lease moved to another relay stay; so do
// those of a partition taken over while the acknowledgement waited for its lease row (the
// latest version of the row is checked), and the wait ends with the takeover's commit.
func TestStoreAckFencedDeletesOnlyOwnedPartitions(t *testing.T) {
	for _, retain := range []bool{false, true} {
		t.Run(fmt.Sprintf("retain=%v", retain), func(t *testing.T) {
			fx := newStoreFixture(t, outbox.Postgres)
			if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
				t.Fatal(err)
			}
			const ttl = time.Minute // no lease runs out between the test's statements, however slow
			fx.heartbeat("A", ttl)
			aLeases := fx.leases("A")
			fx.heartbeat("B", ttl)
			fx.heartbeat("A", ttl) // gives up half
			fx.heartbeat("B", ttl) // takes it
			bParts := map[int]bool{}
			for _, l := range fx.leases("B") {
				bParts[l.Partition] = true
			}
			// Keys in three partitions: one of B's now, two still A's.
			var moved, kept, raced string
			for i := 0; moved == "" || kept == "" || raced == ""; i++ {
				k := fmt.Sprintf("k%d", i)
				p := outbox.PartitionOf(outbox.KeyHash("", "order", k))
				switch {
				case bParts[p] && moved == "":
					moved = k
				case !bParts[p] && kept == "":
					kept = k
				case !bParts[p] && raced == "" && p != outbox.PartitionOf(outbox.KeyHash("", "order", kept)):
					raced = k
				}
			}
			fx.write(moved, 10)
			fx.write(kept, 10, 10)
			racedPart := fx.write(raced, 10)
			recs := fx.claim(10, 1<<20)
			seqs := make([]int64, len(recs))
			for i, r := range recs {
				seqs[i] = r.Seq
			}
			// Another transaction locks the lease row of raced's partition and moves it to B.
			takeover, err := fx.db.BeginTx(fx.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = takeover.Rollback() }()
			if _, err := takeover.Exec("UPDATE "+fx.store.Table.Leases()+" SET owner = 'B', epoch = epoch + 1"+
				" WHERE lease_group = 'default' AND partition_no = $1", racedPart); err != nil {
				t.Fatal(err)
			}
			type result struct {
				owned map[int]bool
				err   error
			}
			done := make(chan result, 1)
			go func() {
				owned, err := fx.store.AckFenced(fx.ctx, fx.db, "A", aLeases, seqs, retain)
				done <- result{owned, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("the acknowledgement did not wait for the locked lease row: %v, %v", r.owned, r.err)
			case <-time.After(300 * time.Millisecond):
			}
			if err := takeover.Commit(); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(2 * time.Minute): // a bound against a hang
				t.Fatal("the acknowledgement still waits 2 minutes after the takeover committed")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.owned) != outbox.Partitions/2-1 || r.owned[racedPart] {
				t.Fatalf("owned %d partitions (raced partition %d: %v), want %d without it", len(r.owned), racedPart, r.owned[racedPart], outbox.Partitions/2-1)
			}
			left := map[string]int{}
			rows, err := fx.db.Query("SELECT aggregate_id, status FROM " + fx.store.Table.Events())
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var key string
				var status int
				if err := rows.Scan(&key, &status); err != nil {
					t.Fatal(err)
				}
				if status == relay.StatusPending {
					left[key]++
				}
			}
			if want := map[string]int{moved: 1, raced: 1}; fmt.Sprint(left) != fmt.Sprint(want) {
				t.Fatalf("pending after the acknowledgement: %v, want %v", left, want)
			}
			if retain {
				var published int
				if err := fx.db.QueryRow("SELECT COUNT(*) FROM " + fx.store.Table.Events() + " WHERE status = 1 AND published_at IS NOT NULL").Scan(&published); err != nil || published != 2 {
					t.Fatalf("retained as published: %d (%v), want 2", published, err)
				}
			}
		})
	}
}

// With retention, a published row stays in the table: it must not keep the next attempt time of
// an earlier failure, which the cdc source reads as "this key is left to the retry path" and
// which then kept every later event of the key off the stream until the row was pruned. Both
// acknowledgements: the transaction's (ack) and the cdc source's one statement (ackFenced).
func TestStoreRetainedAckClearsTheNextAttempt(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(map[bool]string{false: "ack", true: "ackFenced"}[fenced], func(t *testing.T) {
			fx := newStoreFixture(t, outbox.Postgres)
			if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
				t.Fatal(err)
			}
			fx.heartbeat("A", time.Minute)
			fx.write("order-1", 16)
			first := fx.claim(10, 1<<20)
			if len(first) != 1 {
				t.Fatalf("claimed %d rows, want 1", len(first))
			}
			seq := first[0].Seq
			fx.ackTx(func(tx *sql.Tx) error {
				return fx.store.Fail(fx.ctx, tx, seq, 1, time.Now().Add(-time.Second), false, "broker down")
			})
			if fenced {
				owned, err := fx.store.AckFenced(fx.ctx, fx.db, "A", fx.leases("A"), []int64{seq}, true)
				if err != nil || !owned[first[0].Partition] {
					t.Fatalf("ackFenced: owned %v, %v", owned, err)
				}
			} else {
				fx.ackTx(func(tx *sql.Tx) error { return fx.store.Ack(fx.ctx, tx, []int64{seq}, true) })
			}
			fx.write("order-1", 16)
			recs := fx.claim(10, 1<<20)
			if len(recs) != 1 {
				t.Fatalf("claimed %d rows after the retained ack, want the new one", len(recs))
			}
			admitted, _, err := fx.store.Admit(fx.ctx, fx.db, recs)
			if err != nil {
				t.Fatal(err)
			}
			if !admitted[recs[0].Seq] {
				t.Fatal("the key's next event is held back by a published row that once failed")
			}
		})
	}
}

// TestPollingAcknowledgesInOneStatementWhereTheDatabaseCan: the polling source, like the cdc
// source, acknowledges a batch the broker took whole with ackFenced on PostgreSQL, and with the
// fenced transaction on the databases without the one statement.
func TestPollingAcknowledgesInOneStatementWhereTheDatabaseCan(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		f, err := New(Config{DB: fx.db, Dialect: fx.store.Dialect, Table: fx.writer.Table().Events(),
			Publisher: gochannel.NewGoChannel(gochannel.Config{}, nil), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if want := fx.store.Dialect == outbox.Postgres; f.acker.OneStatement() != want {
			t.Errorf("polling on %s acknowledges in one statement: %v, want %v", fx.store.Dialect, f.acker.OneStatement(), want)
		}
	})
}
