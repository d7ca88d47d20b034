package ack

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The acknowledger's two strategies for a batch the broker took whole (one statement on
// PostgreSQL, the fenced transaction elsewhere) and its fenced transaction for settlements, on
// the databases themselves: they are SQL by nature. SQLite runs anywhere; PostgreSQL and MariaDB
// are the services of scripts/services.sh.

const owner = "relay-1"

type fixture struct {
	ctx    context.Context
	db     *sql.DB
	writer *outbox.Writer
	store  *relay.Store
	reg    *prometheus.Registry
	acker  *Acknowledger
	leases []relay.Lease
}

// forEachDatabase runs fn on a fresh outbox of each database, with Retention retention.
func forEachDatabase(t *testing.T, retention time.Duration, fn func(t *testing.T, fx *fixture)) {
	for _, d := range []outbox.Dialect{outbox.SQLite, outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) { fn(t, newFixture(t, d, retention)) })
	}
}

func newFixture(t *testing.T, d outbox.Dialect, retention time.Duration) *fixture {
	t.Helper()
	var db *sql.DB
	switch d {
	case outbox.Postgres:
		db = testsupport.OpenPostgres(t)
	case outbox.MySQL:
		db = testsupport.OpenMySQL(t)
	default:
		var err error
		if db, err = sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)&_txlock=immediate"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
	}
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: d, Table: testsupport.UniqueName("ack")})
	ctx := t.Context()
	table := w.Table()
	reg := prometheus.NewRegistry()
	m, err := relay.NewMetrics(reg, table.Events())
	if err != nil {
		t.Fatal(err)
	}
	store := &relay.Store{Table: table, Dialect: d, Group: "default", IdleTimeout: 10 * time.Second}
	fx := &fixture{ctx: ctx, db: db, writer: w, store: store, reg: reg,
		acker: New(relay.Core{DB: db, RelayID: owner, Workers: 1, Retention: retention, Store: store, Metrics: m,
			Log: slog.New(slog.DiscardHandler)})}
	if err := store.EnsureLeaseRows(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Heartbeat(ctx, db, owner, time.Minute, lease.PerPartition{}, nil); err != nil {
		t.Fatal(err)
	}
	if fx.leases, err = store.LiveLeases(ctx, db, owner, 0, 1); err != nil || len(fx.leases) != outbox.Partitions {
		t.Fatalf("leases %d, %v; want all %d", len(fx.leases), err, outbox.Partitions)
	}
	return fx
}

// write commits one event of each key (of distinct partitions) and claims them.
func (fx *fixture) write(t *testing.T, keys ...string) []relay.Record {
	t.Helper()
	tx, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := fx.writer.WriteTx(fx.ctx, tx, outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: k, EventType: "placed"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	all := make([]int, outbox.Partitions)
	for p := range all {
		all[p] = p
	}
	records, err := fx.store.Claim(fx.ctx, fx.db, all, 100, 1<<20)
	if err != nil || len(records) != len(keys) {
		t.Fatalf("claimed %d records, %v; want %d", len(records), err, len(keys))
	}
	slices.SortFunc(records, func(a, b relay.Record) int { return int(a.Seq - b.Seq) })
	return records
}

// keys returns n keys of distinct partitions.
func keys(n int) []string {
	var out []string
	seen := map[int]bool{}
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("key-%d", i)
		if p := outbox.PartitionOf(outbox.KeyHash("", "order", k)); !seen[p] {
			seen[p] = true
			out = append(out, k)
		}
	}
	return out
}

type row struct{ status, attempts int }

// rows returns the table's rows by seq.
func (fx *fixture) rows(t *testing.T) map[int64]row {
	t.Helper()
	rs, err := fx.db.QueryContext(fx.ctx, "SELECT seq, status, attempts FROM "+fx.store.Table.Events())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := map[int64]row{}
	for rs.Next() {
		var seq int64
		var r row
		if err := rs.Scan(&seq, &r.status, &r.attempts); err != nil {
			t.Fatal(err)
		}
		out[seq] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// takeOver increments the epoch of partition p's lease, as another relay's takeover does.
func (fx *fixture) takeOver(t *testing.T, p int) {
	t.Helper()
	if _, err := fx.db.ExecContext(fx.ctx, fmt.Sprintf("UPDATE %s SET epoch = epoch + 1 WHERE lease_group = 'default' AND partition_no = %d",
		fx.store.Table.Leases(), p)); err != nil {
		t.Fatal(err)
	}
}

// TestStrategyIsChosenFromTheStore: a whole batch is acknowledged in one statement where the
// store can (PostgreSQL), by the fenced transaction elsewhere.
func TestStrategyIsChosenFromTheStore(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		table, err := outbox.NewTable(d, "")
		if err != nil {
			t.Fatal(err)
		}
		a := New(relay.Core{Store: &relay.Store{Table: table, Dialect: d, Group: "default"}})
		if got, want := a.OneStatement(), d == outbox.Postgres; got != want {
			t.Errorf("%s: one statement %v, want %v", d, got, want)
		}
	}
}

// TestAcknowledgeDeletesOrRetainsTheBatch: a whole batch's rows are deleted, or marked
// published with Retention, and counted relayed.
func TestAcknowledgeDeletesOrRetainsTheBatch(t *testing.T) {
	for _, retention := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("retention=%v", retention), func(t *testing.T) {
			forEachDatabase(t, retention, func(t *testing.T, fx *fixture) {
				records := fx.write(t, keys(3)...)
				o, lost, err := fx.acker.Acknowledge(fx.ctx, 0, fx.leases, records, nil)
				if err != nil || len(o.Acked) != 3 || len(lost) != 0 || o.Fenced != 0 {
					t.Fatalf("Acknowledge = %d acked, lost %v, fenced %d, %v; want 3 acked, nothing lost", len(o.Acked), lost, o.Fenced, err)
				}
				rows := fx.rows(t)
				for _, r := range records {
					if got, ok := rows[r.Seq]; retention == 0 && ok || retention > 0 && got.status != sqlstore.StatusPublished {
						t.Fatalf("after the acknowledgement: rows %v; want seq %d %s", rows, r.Seq, map[bool]string{true: "marked published", false: "deleted"}[retention > 0])
					}
				}
				if got := testsupport.CounterSum(t, fx.reg, "outboxkit_forwarder_relayed_total"); got != 3 {
					t.Fatalf("relayed %v, want 3", got)
				}
			})
		})
	}
}

// TestAcknowledgeLeavesALostPartitionsRows: the rows of a partition taken over meanwhile are
// left to the new owner, untouched, and counted, on both strategies: a whole batch, and one
// with a settlement (the fenced transaction everywhere).
func TestAcknowledgeLeavesALostPartitionsRows(t *testing.T) {
	for _, settle := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "with a settlement"}[settle], func(t *testing.T) {
			forEachDatabase(t, 0, func(t *testing.T, fx *fixture) {
				records := fx.write(t, keys(3)...)
				lostRecord := records[0]
				fx.takeOver(t, lostRecord.Partition)
				acked, settled := records, []relay.Settlement(nil)
				if settle {
					acked = records[:2]
					settled = []relay.Settlement{{Record: records[2], Attempts: 1, Next: time.Now().Add(time.Hour), Reason: "busy"}}
				}
				o, lost, err := fx.acker.Acknowledge(fx.ctx, 0, fx.leases, acked, settled)
				if err != nil {
					t.Fatal(err)
				}
				if len(lost) != 1 || lost[lostRecord.Partition] != 1 || o.Fenced != 1 || len(o.Acked) != len(acked)-1 {
					t.Fatalf("lost %v, fenced %d, acked %d; want partition %d's row lost, the rest acked", lost, o.Fenced, len(o.Acked), lostRecord.Partition)
				}
				rows := fx.rows(t)
				if r, ok := rows[lostRecord.Seq]; !ok || r != (row{sqlstore.StatusPending, 0}) {
					t.Fatalf("the lost partition's row: %+v (present %v), want it pending and untouched", r, ok)
				}
				if _, ok := rows[records[1].Seq]; ok {
					t.Fatalf("an owned partition's acknowledged row is still there: %v", rows)
				}
				if got := testsupport.CounterSum(t, fx.reg, "outboxkit_forwarder_fenced_rows_total"); got != 1 {
					t.Fatalf("fenced rows %v, want 1", got)
				}
			})
		})
	}
}

// TestAcknowledgeWritesTheSettlements: in the same fenced transaction, a failed row is kept for
// its retry with its attempts, and a dead one is dead.
func TestAcknowledgeWritesTheSettlements(t *testing.T) {
	forEachDatabase(t, 0, func(t *testing.T, fx *fixture) {
		records := fx.write(t, keys(3)...)
		settled := []relay.Settlement{
			{Record: records[1], Attempts: 2, Next: time.Now().Add(time.Hour), Reason: "busy"},
			{Record: records[2], Attempts: 3, Next: time.Now(), Dead: true, Reason: "too large"},
		}
		o, lost, err := fx.acker.Acknowledge(fx.ctx, 0, fx.leases, records[:1], settled)
		if err != nil || len(o.Acked) != 1 || len(o.Settled) != 2 || len(lost) != 0 {
			t.Fatalf("Acknowledge = %+v, lost %v, %v; want 1 acked, 2 settled", o, lost, err)
		}
		want := map[int64]row{records[1].Seq: {sqlstore.StatusPending, 2}, records[2].Seq: {sqlstore.StatusDead, 3}}
		if got := fx.rows(t); !maps(got, want) {
			t.Fatalf("rows %v, want %v (the acknowledged one deleted)", got, want)
		}
	})
}

func maps(a, b map[int64]row) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestOwnedUnitMarks: exactly-once's checkpoint marks are kept for the units with an owned
// partition: whole when all of them are owned, with the owned ones as settled otherwise.
func TestOwnedUnitMarks(t *testing.T) {
	owned := map[int]bool{}
	for p := 0; p < outbox.Partitions; p += 8 { // all of unit 0 of 8
		owned[p] = true
	}
	owned[1], owned[9] = true, true // two of unit 1's
	marks := []relay.UnitMark{{Unit: 0, Name: "u0"}, {Unit: 1, Name: "u1"}, {Unit: 2, Name: "u2"}}
	got := OwnedUnitMarks(marks, owned, 8)
	want := []relay.UnitMark{{Unit: 0, Name: "u0"}, {Unit: 1, Name: "u1", Settled: 1<<1 | 1<<9}}
	if !slices.Equal(got, want) {
		t.Fatalf("OwnedUnitMarks = %+v, want %+v", got, want)
	}
}
