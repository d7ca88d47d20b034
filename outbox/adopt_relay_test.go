package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestAdoptedTableRelaysInPerKeyOrder: the seed-004 table, adopted, written by plain SQL from
// several connections at once on shared keys with 10 % rollbacks, while the forwarder relays to
// the real Kafka: every committed event arrives once, in its key's commit order, none of the
// rolled-back ones does, and every row ends PUBLISHED with published_at set, whether the relay
// deletes acknowledged rows or keeps them (retention). Undoing the adoption leaves the table
// working for its old writers.
func TestAdoptedTableRelaysInPerKeyOrder(t *testing.T) {
	forEachAdoptDialect(t, testAdoptedTableRelaysInPerKeyOrder)
}

func testAdoptedTableRelaysInPerKeyOrder(t *testing.T, d outbox.Dialect) {
	brokers := testsupport.KafkaBrokers(t)
	for _, retention := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("retention=%v", retention), func(t *testing.T) {
			a := newAdoptedTable(t, d)
			ctx := context.Background()
			aggType := "Adopt" + strings.TrimPrefix(testsupport.UniqueName(""), "_")
			topic := strings.ToLower(aggType) + ".events"
			testsupport.CreateKafkaTopic(t, brokers, topic)
			backfilled, err := a.insert(ctx, a.db, aggType, "k0", 0) // pending before adoption
			if err != nil {
				t.Fatal(err)
			}
			if res, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil || res.Backfilled != 1 {
				t.Fatalf("Adopt: %+v, %v", res, err)
			}
			counters := createCounters(t, a)
			pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			stop := startForwarder(t, a, pub, retention)
			committed := writeConcurrently(t, a, counters, aggType, 4, 40)
			total := 1
			for _, n := range committed {
				total += n
			}
			records := consumeRecords(t, brokers, topic, total, 90*time.Second)
			stop()
			order, last, seen := commitOrder(t, a, counters), map[string]int{}, map[string]bool{}
			for _, r := range records {
				id := ""
				for _, h := range r.Headers {
					if h.Key == outbox.MetadataEventID {
						id = string(h.Value)
					}
				}
				n, ok := order[id]
				if !ok && id != backfilled || seen[id] {
					t.Errorf("event %s: rolled back or duplicated (seen before: %v)", id, seen[id])
				}
				if key := string(r.Key); ok && n <= last[key] {
					t.Errorf("key %s: commit %d relayed after commit %d: not the commit order", key, n, last[key])
				}
				last[string(r.Key)], seen[id] = n, true
			}
			if len(records) != total {
				t.Errorf("%d records, want %d (committed)", len(records), total)
			}
			if got := a.statuses(t); got["PUBLISHED+at"] != total || len(got) != 1 {
				t.Errorf("team rows %v, want all %d PUBLISHED with published_at", got, total)
			}
			checkUndo(t, a, aggType)
		})
	}
}

// createCounters creates the witness tables of writeOne in the team's schema: a counter per key
// k0..k4 and the log of the number each event drew.
func createCounters(t *testing.T, a adoptedTable) string {
	t.Helper()
	counters, idType := a.schema+".counters", "UUID"
	if a.dialect == outbox.MySQL {
		idType = "CHAR(36)"
	}
	for _, stmt := range []string{"CREATE TABLE " + counters + " (k VARCHAR(16) PRIMARY KEY, n INT NOT NULL)",
		"INSERT INTO " + counters + " (k, n) VALUES ('k0', 0), ('k1', 0), ('k2', 0), ('k3', 0), ('k4', 0)",
		"CREATE TABLE " + counters + "_log (event_id " + idType + " PRIMARY KEY, n INT NOT NULL)"} {
		if _, err := a.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	return counters
}

// startForwarder runs a forwarder on the relay table until the returned stop is called.
func startForwarder(t *testing.T, a adoptedTable, pub *kafka.Publisher, retention time.Duration) (stop func()) {
	t.Helper()
	f, err := forwarder.New(forwarder.Config{DB: a.db, Dialect: a.dialect, Table: a.relay.Events(), Publisher: pub,
		// A lease of 30 s: the test asserts no duplicates, and a 2 s lease runs out for a relay the
		// machine's load holds up, whose batch is then published again.
		Retention: retention, LeaseTTL: 30 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("forwarder.Run: %v", err)
		}
	}
}

// writeConcurrently runs writers connections, each committing or (10 %) rolling back txs
// transactions (writeOne) of a random key k0..k4. It returns the committed events per key.
func writeConcurrently(t *testing.T, a adoptedTable, counters, aggType string, writers, txs int) map[string]int {
	t.Helper()
	return writeWhile(t, a, counters, aggType, writers, func(n int) bool { return n < txs }, nil)
}

// writeWhile is writeConcurrently with each writer going on while more(the transactions it has
// run) is true, counting every commit in commits (when not nil).
func writeWhile(t *testing.T, a adoptedTable, counters, aggType string, writers int, more func(int) bool, commits *atomic.Int64) map[string]int {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	committed := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 21))
			for n := 0; more(n); n++ {
				key := fmt.Sprintf("k%d", r.IntN(5))
				commit := r.IntN(10) != 0
				if err := writeOne(ctx, a, r, counters, aggType, key, commit); err != nil {
					errs <- err
					return
				}
				if commit {
					mu.Lock()
					committed[key]++
					mu.Unlock()
					if commits != nil {
						commits.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return committed
}

// writeOne is one business transaction of a writer: the event first, then, as its last
// statement, the key's witness row, whose lock is held to the commit: the witness numbers, logged
// per event, are the key's commit order.
func writeOne(ctx context.Context, a adoptedTable, r *rand.Rand, counters, aggType, key string, commit bool) error {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	id, err := a.insert(ctx, tx, aggType, key, 0)
	if err != nil {
		return fmt.Errorf("insert into the adopted table: %w", err)
	}
	time.Sleep(time.Duration(r.IntN(10)) * time.Millisecond)
	var n int
	if _, err := tx.ExecContext(ctx, a.q("UPDATE "+counters+" SET n = n + 1 WHERE k = ?"), key); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, a.q("SELECT n FROM "+counters+" WHERE k = ?"), key).Scan(&n); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, a.q("INSERT INTO "+counters+"_log (event_id, n) VALUES (?, ?)"), id, n); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback()
	}
	return tx.Commit()
}

// commitOrder reads the witness number of every committed event.
func commitOrder(t *testing.T, a adoptedTable, counters string) map[string]int {
	t.Helper()
	rows, err := a.db.Query("SELECT CAST(event_id AS CHAR(36)), n FROM " + counters + "_log")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// checkUndo: after Unadopt, an old writer's INSERT works and stays PENDING for its own relay,
// and nothing reaches the relay table.
func checkUndo(t *testing.T, a adoptedTable, aggType string) {
	t.Helper()
	ctx := context.Background()
	before := a.relayRows(t)
	if err := outbox.Unadopt(ctx, a.db, a.relay, a.cfg, false); err != nil {
		t.Fatalf("Unadopt: %v", err)
	}
	id, err := a.insert(ctx, a.db, aggType, "after-undo", 0)
	if err != nil {
		t.Fatalf("INSERT after undo: %v", err)
	}
	var status string
	if err := a.db.QueryRow(a.q("SELECT status FROM "+a.team+" WHERE id = ?"), id).Scan(&status); err != nil || status != "PENDING" {
		t.Errorf("row after undo: %q, %v; want PENDING", status, err)
	}
	if after := a.relayRows(t); after != before {
		t.Errorf("relay table rows %d -> %d after undo, want unchanged", before, after)
	}
	if err := outbox.Unadopt(ctx, a.db, a.relay, a.cfg, true); err != nil {
		t.Fatalf("Unadopt with the relay table: %v", err)
	}
	if a.relayExists(t) {
		t.Errorf("relay table %s left after Unadopt(drop)", a.relay)
	}
}

// TestAdoptWhileWritersWrite: adopting while writers keep inserting events of the same keys
// misses none and copies none twice. The events written after the adoption follow, per key, every
// backfilled one and each other in commit order (the backfill and the triggers are installed in
// one transaction that the writers wait for). The backfilled ones are in created_at order, the
// order the team's own relay used: the table holds no record of their commit order.
//
// On MariaDB/MySQL the writers wait for the adoption's LOCK TABLES instead of a transaction's
// table lock.
func TestAdoptWhileWritersWrite(t *testing.T) {
	forEachAdoptDialect(t, testAdoptWhileWritersWrite)
}

func testAdoptWhileWritersWrite(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	counters := createCounters(t, a)
	// The writers run until at least 20 events were committed before the adoption started and
	// 20 after it ended (or 500 transactions each, should the adoption fail), so that some events
	// are always backfilled and some copied by the trigger, whatever the machine's speed.
	const some = 20
	var commits atomic.Int64
	var stop atomic.Bool
	waitFor := func(n int64) {
		for commits.Load() < n && !stop.Load() {
			time.Sleep(5 * time.Millisecond)
		}
	}
	adopted := make(chan error, 1)
	var backfilled int64
	go func() {
		defer stop.Store(true)
		waitFor(some)
		res, err := outbox.Adopt(context.Background(), a.db, a.relay, a.cfg)
		backfilled = res.Backfilled
		adopted <- err
		waitFor(commits.Load() + some)
	}()
	committed := writeWhile(t, a, counters, "Order", 4, func(n int) bool { return !stop.Load() && n < 500 }, &commits)
	if err := <-adopted; err != nil {
		t.Fatal(err)
	}
	if copied := int64(a.relayRows(t)) - backfilled; backfilled < some || copied < some {
		t.Errorf("%d events backfilled and %d copied by the trigger, want at least %d of each", backfilled, copied, some)
	}
	total := 0
	for _, n := range committed {
		total += n
	}
	rows, err := a.db.Query("SELECT r.aggregate_id, l.n, r.created_at FROM " + a.relay.Events() + " r JOIN " + counters +
		"_log l ON l.event_id = r.event_id ORDER BY r.seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last, copied, lastCreated := map[string]int{}, 0, time.Time{}
	for rows.Next() {
		var key string
		var n int
		var created time.Time
		if err := rows.Scan(&key, &n, &created); err != nil {
			t.Fatal(err)
		}
		switch {
		case int64(copied) < backfilled:
			if created.Before(lastCreated) {
				t.Errorf("backfilled event %d created at %v, before the previous one (%v)", copied, created, lastCreated)
			}
			lastCreated, last[key] = created, max(last[key], n)
		case n <= last[key]:
			t.Errorf("key %s: commit %d copied after commit %d", key, n, last[key])
		default:
			last[key] = n
		}
		copied++
	}
	if copied != total || a.relayRows(t) != total {
		t.Errorf("%d events copied (%d rows in the relay table), want the %d committed", copied, a.relayRows(t), total)
	}
}
