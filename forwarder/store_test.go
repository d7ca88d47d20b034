package forwarder

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay/relaytest"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/testdb"
	"github.com/outboxkit/outboxkit/outbox"
)

// The store conformance suite: every store operation (claim, park, fail, dead, prune, admin,
// leases) on each of the three databases, against the real servers.

type storeFixture struct {
	t      testing.TB
	ctx    context.Context
	db     *sql.DB
	writer *outbox.Writer
	store  *relay.Store
	adm    *admin.Admin
}

func forEachDialect(t *testing.T, fn func(t *testing.T, fx *storeFixture)) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(string(d), func(t *testing.T) { fn(t, newStoreFixture(t, d)) })
	}
}

func newStoreFixture(t testing.TB, dialect outbox.Dialect) *storeFixture {
	t.Helper()
	db := testdb.Open(t, dialect)
	name := testsupport.UniqueName("store")
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: dialect, Table: name})
	adm, err := admin.New(db, dialect, name)
	if err != nil {
		t.Fatal(err)
	}
	return &storeFixture{t: t, ctx: context.Background(), db: db, writer: w, adm: adm,
		store: &relay.Store{Table: w.Table(), Dialect: dialect, Group: "default"}}
}

// write commits events of key key with payloads of the given sizes and returns their partition.
func (fx *storeFixture) write(key string, sizes ...int) int {
	fx.t.Helper()
	return relaytest.Write(fx.t, fx.ctx, fx.db, fx.writer, key, sizes...)
}

func allPartitions() []int {
	out := make([]int, outbox.Partitions)
	for i := range out {
		out[i] = i
	}
	return out
}

func (fx *storeFixture) claim(limit int, maxBytes int64) []relay.Record {
	fx.t.Helper()
	recs, err := fx.store.Claim(fx.ctx, fx.db, allPartitions(), limit, maxBytes)
	if err != nil {
		fx.t.Fatal(err)
	}
	return recs
}

func (fx *storeFixture) ackTx(fn func(tx *sql.Tx) error) {
	fx.t.Helper()
	if err := relay.InTx(fx.ctx, fx.db, fn); err != nil {
		fx.t.Fatal(err)
	}
}

func TestStoreClaimOrderLimitAndBytes(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		fx.write("a", 100, 100, 100)
		fx.write("b", 100, 100)
		recs := fx.claim(1000, 1<<20)
		if len(recs) != 5 {
			t.Fatalf("claimed %d rows, want 5", len(recs))
		}
		for i := 1; i < len(recs); i++ {
			if recs[i].Seq <= recs[i-1].Seq {
				t.Fatalf("claim not in sequence order: %d after %d", recs[i].Seq, recs[i-1].Seq)
			}
		}
		if got := fx.claim(2, 1<<20); len(got) != 2 {
			t.Fatalf("limit 2 claimed %d rows", len(got))
		}
		// 250 bytes: two 100-byte rows fit, the third would pass the bound.
		if got := fx.claim(1000, 250); len(got) != 2 {
			t.Fatalf("maxBytes 250 claimed %d rows of 100 bytes, want 2", len(got))
		}
		if got := fx.claim(1000, 300); len(got) != 3 {
			t.Fatalf("maxBytes 300 claimed %d rows of 100 bytes, want 3", len(got))
		}
		// An event larger than the bound is claimed alone.
		fx2 := newStoreFixture(t, fx.store.Dialect)
		fx2.write("big", 5000, 10)
		if got := fx2.claim(1000, 1000); len(got) != 1 || len(got[0].Event.Payload) != 5000 {
			t.Fatalf("a 5000-byte event with maxBytes 1000: claimed %d rows, want the big one alone", len(got))
		}
	})
}

func TestStoreFailParksKeyDeadBlocksItAndAdminReleasesIt(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		fx.write("a", 10, 10)
		fx.write("b", 10)
		recs := fx.claim(1000, 1<<20)
		first := recs[0]
		if first.Event.AggregateID != "a" {
			t.Fatalf("first row is of key %q", first.Event.AggregateID)
		}
		fx.ackTx(func(tx *sql.Tx) error {
			return fx.store.Fail(fx.ctx, tx, first.Seq, 1, time.Now().Add(time.Hour), false, "boom")
		})
		got := fx.claim(1000, 1<<20)
		if len(got) != 1 || got[0].Event.AggregateID != "b" {
			t.Fatalf("with key a parked, claimed %d rows (want only b's)", len(got))
		}
		// Due again: the key flows in order.
		fx.ackTx(func(tx *sql.Tx) error {
			return fx.store.Fail(fx.ctx, tx, first.Seq, 1, time.Now().Add(-time.Second), false, "boom")
		})
		if got := fx.claim(1000, 1<<20); len(got) != 3 || got[0].Seq != first.Seq || got[0].Attempts != 1 {
			t.Fatalf("after the retry is due: %d rows, first seq %d attempts %d", len(got), got[0].Seq, got[0].Attempts)
		}
		// Dead: the key is held until an operator acts.
		fx.ackTx(func(tx *sql.Tx) error {
			return fx.store.Fail(fx.ctx, tx, first.Seq, 2, time.Now(), true, "poison")
		})
		if got := fx.claim(1000, 1<<20); len(got) != 1 {
			t.Fatalf("with key a dead, claimed %d rows, want b's only", len(got))
		}
		dead, err := fx.adm.DeadLetters(fx.ctx, 10)
		if err != nil || len(dead) != 1 || dead[0].EventID != first.Event.ID {
			t.Fatalf("dead letters %+v, %v", dead, err)
		}
		if n, err := fx.adm.Replay(fx.ctx, first.Event.ID); err != nil || n != 1 {
			t.Fatalf("replay: %d, %v", n, err)
		}
		if got := fx.claim(1000, 1<<20); len(got) != 3 || got[0].Seq != first.Seq || got[0].Attempts != 0 {
			t.Fatalf("after replay: %d rows", len(got))
		}
		fx.ackTx(func(tx *sql.Tx) error {
			return fx.store.Fail(fx.ctx, tx, first.Seq, 1, time.Now(), true, "poison")
		})
		if n, err := fx.adm.Discard(fx.ctx, first.Event.ID); err != nil || n != 1 {
			t.Fatalf("discard: %d, %v", n, err)
		}
		if got := fx.claim(1000, 1<<20); len(got) != 2 || got[0].Event.AggregateID != "a" || got[0].Seq == first.Seq {
			t.Fatalf("after discard: %d rows", len(got))
		}
	})
}

// A last_error cut inside a multi-byte character made PostgreSQL reject the whole batch's
// acknowledgements ("invalid byte sequence for encoding UTF8"), every time.
func TestStoreFailKeepsLastErrorValidUTF8(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		fx.write("a", 10)
		r := fx.claim(10, 1<<20)[0]
		reason := strings.Repeat("x", relay.MaxReasonBytes-1) + "é and more" + string([]byte{0xff})
		fx.ackTx(func(tx *sql.Tx) error {
			return fx.store.Fail(fx.ctx, tx, r.Seq, 1, time.Now(), true, reason)
		})
		var stored string
		if err := fx.db.QueryRow("SELECT last_error FROM " + fx.store.Table.Events()).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(stored) || len(stored) > relay.MaxReasonBytes || !strings.HasPrefix(reason, stored) {
			t.Fatalf("stored last_error of %d bytes, valid UTF-8 %v", len(stored), utf8.ValidString(stored))
		}
	})
}

func TestStoreAckDeletesOrRetainsAndPrunes(t *testing.T) {
	forEachDialect(t, func(t *testing.T, fx *storeFixture) {
		fx.write("a", 10, 10, 10)
		recs := fx.claim(10, 1<<20)
		fx.ackTx(func(tx *sql.Tx) error { return fx.store.Ack(fx.ctx, tx, []int64{recs[0].Seq}, false) })
		fx.ackTx(func(tx *sql.Tx) error { return fx.store.Ack(fx.ctx, tx, []int64{recs[1].Seq, recs[2].Seq}, true) })
		var rows, published int
		if err := fx.db.QueryRow("SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 1 THEN 1 ELSE 0 END), 0) FROM "+
			fx.store.Table.Events()).Scan(&rows, &published); err != nil {
			t.Fatal(err)
		}
		if rows != 2 || published != 2 {
			t.Fatalf("after one delete and two retained acks: %d rows, %d published", rows, published)
		}
		if got := fx.claim(10, 1<<20); len(got) != 0 {
			t.Fatalf("published rows claimed again: %d", len(got))
		}
		if n, err := fx.store.Prune(fx.ctx, fx.db, time.Now().Add(-time.Hour), 10); err != nil || n != 0 {
			t.Fatalf("prune before the cutoff: %d, %v", n, err)
		}
		if n, err := fx.store.Prune(fx.ctx, fx.db, time.Now().Add(time.Second), 1); err != nil || n != 1 {
			t.Fatalf("prune with limit 1: %d, %v", n, err)
		}
		if n, err := fx.store.Prune(fx.ctx, fx.db, time.Now().Add(time.Second), 10); err != nil || n != 1 {
			t.Fatalf("prune the rest: %d, %v", n, err)
		}
		st, err := fx.store.Stats(fx.ctx, fx.db)
		if err != nil || len(st) != 0 {
			t.Fatalf("stats of an empty outbox: %+v, %v", st, err)
		}
	})
}

func (fx *storeFixture) heartbeat(owner string, ttl time.Duration) int {
	fx.t.Helper()
	return relaytest.Heartbeat(fx.t, fx.ctx, fx.db, fx.store, owner, ttl)
}

func (fx *storeFixture) leases(owner string) []relay.Lease {
	fx.t.Helper()
	return relaytest.Leases(fx.t, fx.ctx, fx.db, fx.store, owner)
}

func (fx *storeFixture) fenced(owner string, claimed []relay.Lease) map[int]bool {
	fx.t.Helper()
	var valid map[int]bool
	fx.ackTx(func(tx *sql.Tx) (err error) {
		valid, err = fx.store.Fence(fx.ctx, tx, owner, claimed)
		return err
	})
	return valid
}

func TestStoreLeasesShareFenceAndTakeOver(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			fx := newStoreFixture(t, d)
			if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
				t.Fatal(err)
			}
			// Leases of a minute: the heartbeats of the test follow each other in well under
			// that, however loaded the machine, so no lease runs out between two of them except
			// where the test makes A stall, with a lease of 2 s.
			const ttl, stall = time.Minute, 2 * time.Second
			if n := fx.heartbeat("A", ttl); n != outbox.Partitions {
				t.Fatalf("a lone relay owns %d partitions", n)
			}
			aLeases := fx.leases("A")
			if len(aLeases) != outbox.Partitions || aLeases[0].Epoch != 1 {
				t.Fatalf("A's leases: %d, first epoch %d", len(aLeases), aLeases[0].Epoch)
			}
			if n := fx.heartbeat("B", ttl); n != 0 {
				t.Fatalf("B took %d partitions that A holds", n)
			}
			if n := fx.heartbeat("A", ttl); n != outbox.Partitions/2 {
				t.Fatalf("A kept %d partitions with two relays, want %d", n, outbox.Partitions/2)
			}
			if n := fx.heartbeat("B", ttl); n != outbox.Partitions/2 {
				t.Fatalf("B took %d partitions, want %d", n, outbox.Partitions/2)
			}
			// A claimed rows under its old leases: the partitions it released fail the fence.
			valid := fx.fenced("A", aLeases)
			if len(valid) != outbox.Partitions/2 {
				t.Fatalf("A's fence passed %d partitions after giving up half, want %d", len(valid), outbox.Partitions/2)
			}
			for _, l := range fx.leases("B") {
				if valid[l.Partition] || l.Epoch != 2 {
					t.Fatalf("partition %d moved to B (epoch %d) but A's fence passes: %v", l.Partition, l.Epoch, valid[l.Partition])
				}
			}
			// A stalls past its TTL: B takes everything over, and A can acknowledge nothing.
			if n := fx.heartbeat("A", stall); n != outbox.Partitions/2 {
				t.Fatalf("A's last heartbeat before it stalls kept %d partitions, want %d", n, outbox.Partitions/2)
			}
			aNow := fx.leases("A")
			deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
			// B's heartbeats with the same short TTL: B judges A dead once A's last heartbeat is
			// older than B's TTL.
			for fx.heartbeat("B", stall) != outbox.Partitions {
				if time.Now().After(deadline) {
					t.Fatalf("B did not take A's partitions over in 2 minutes after A's %v lease", stall)
				}
				time.Sleep(stall / 4)
			}
			if valid := fx.fenced("A", aNow); len(valid) != 0 {
				t.Fatalf("after the takeover, A's fence passes %d partitions", len(valid))
			}
			if got := fx.leases("A"); len(got) != 0 {
				t.Fatalf("A still reads %d live leases", len(got))
			}
			// A resumes: it gets its share back, under new epochs.
			fx.heartbeat("A", ttl)
			fx.heartbeat("B", ttl)
			if n := fx.heartbeat("A", ttl); n != outbox.Partitions/2 {
				t.Fatalf("A owns %d partitions after resuming", n)
			}
			for _, l := range fx.leases("A") {
				if l.Epoch < 3 {
					t.Fatalf("partition %d back to A under epoch %d, want a new epoch", l.Partition, l.Epoch)
				}
			}
			if err := fx.store.ReleaseAll(fx.ctx, fx.db, "A"); err != nil {
				t.Fatal(err)
			}
			if got := fx.leases("A"); len(got) != 0 {
				t.Fatalf("A holds %d leases after releaseAll", len(got))
			}
		})
	}
}

func TestStoreSQLiteAllowsOneRelay(t *testing.T) {
	fx := newStoreFixture(t, outbox.SQLite)
	if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
		t.Fatal(err)
	}
	const ttl = time.Minute // A stays alive between the test's statements, however slow they are
	fx.heartbeat("A", ttl)
	_, err := fx.store.Heartbeat(fx.ctx, fx.db, "B", ttl, lease.PerPartition{}, nil)
	if err == nil || !strings.Contains(err.Error(), `relay "A" is running on this SQLite database`) {
		t.Fatalf("a second relay on one SQLite database: %v", err)
	}
	other := &relay.Store{Table: fx.store.Table, Dialect: outbox.SQLite, Group: "tenants:x"}
	if _, err := other.Heartbeat(fx.ctx, fx.db, "C", ttl, lease.PerPartition{}, nil); err == nil {
		t.Fatal("a relay of another lease group was accepted beside a running one")
	}
	if err := fx.store.ReleaseAll(fx.ctx, fx.db, "A"); err != nil {
		t.Fatal(err)
	}
	if n := fx.heartbeat("B", ttl); n != outbox.Partitions {
		t.Fatalf("after A stopped, B owns %d partitions", n)
	}
}

// The claim's parked-keys subquery must be materialized once, never run once per candidate row:
// MariaDB chose a dependent subquery for a plain NOT IN on a table just filled (statistics of
// one row), and a 20,000-event backlog took 14 s instead of 1.3 s to drain.
func TestStoreClaimPlanHasNoDependentSubquery(t *testing.T) {
	fx := newStoreFixture(t, outbox.MySQL)
	sizes := make([]int, 1000)
	for i := range sizes {
		sizes[i] = 64
	}
	for i := range 5 {
		fx.write(fmt.Sprint("k", i), sizes...)
	}
	query, args := fx.store.ClaimQuery(allPartitions(), 1000, 4<<20)
	rows, err := fx.db.Query("EXPLAIN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if c == "select_type" && strings.Contains(vals[i].String, "DEPENDENT") {
				t.Fatalf("the claim runs a %s: a subquery per candidate row", vals[i].String)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// A relay paused inside a transaction that locks lease rows must not keep its partitions: the
// database ends the idle transaction after idleTimeout, and the others take the partitions over.
// (Without the bound, acquire skips the locked rows for as long as the pause lasts.) The pause
// lasts until B holds the partitions, so B can only get them through the database ending the
// transaction; the test's own bound only stops a hang.
func TestStoreIdleLeaseTransactionDoesNotBlockTakeover(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			fx := newStoreFixture(t, d)
			fx.store.IdleTimeout = time.Second
			if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
				t.Fatal(err)
			}
			const ttl = time.Second
			fx.heartbeat("A", ttl)
			locked, resume := make(chan error, 1), make(chan struct{})
			paused := make(chan error, 1)
			go func() {
				paused <- fx.store.InLeaseTx(fx.ctx, fx.db, func(tx *sql.Tx) error {
					_, err := fx.store.LockLeases(fx.ctx, tx, allPartitions(), false)
					locked <- err
					if err != nil {
						return err
					}
					<-resume // "paused" between two statements, until B holds the partitions
					_, err = tx.ExecContext(fx.ctx, "SELECT 1")
					return err
				})
			}()
			defer func() {
				select {
				case <-resume:
				default:
					close(resume)
				}
			}()
			if err := <-locked; err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for fx.heartbeat("B", ttl) != outbox.Partitions {
				if time.Since(start) > 2*time.Minute { // a bound against a hang, not a speed check
					t.Fatalf("B could not take the partitions of a relay paused inside a lease transaction in 2 minutes")
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("taken over %v after the lease transaction paused", time.Since(start))
			close(resume)
			if err := <-paused; err == nil {
				t.Fatal("the paused transaction committed after the database should have ended it")
			}
		})
	}
}

// A lease transaction that fails must not return its MariaDB connection to the pool (possibly
// the application's) with the idle-transaction timeout still set.
func TestStoreFailedLeaseTransactionResetsTheConnection(t *testing.T) {
	fx := newStoreFixture(t, outbox.MySQL)
	fx.db.SetMaxOpenConns(1)
	fx.store.IdleTimeout = 2 * time.Second
	boom := errors.New("boom")
	if err := fx.store.InLeaseTx(fx.ctx, fx.db, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("inLeaseTx returned %v", err)
	}
	var timeout int
	if err := fx.db.QueryRow("SELECT @@SESSION.idle_transaction_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != 0 {
		t.Fatalf("the pooled connection kept idle_transaction_timeout = %d after a failed lease transaction", timeout)
	}
}
