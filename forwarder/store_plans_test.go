package forwarder

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// The plans PostgreSQL runs for the statements a relay sends once per batch: each reads the
// batch's rows once, and a prepared statement keeps one generic plan instead of being planned
// again for every batch's arrays.

// planFixture is a PostgreSQL table of rows events over 1,000 keys, every partition leased by
// relay "A"; with analyzed, its statistics are fresh (else the tables are as new, before
// autovacuum first reads them).
type planFixture struct {
	*storeFixture
	leases []relay.Lease
	seqs   []int64
}

func newPlanFixture(t testing.TB, rows int, analyzed bool) *planFixture {
	t.Helper()
	fx := newStoreFixture(t, outbox.Postgres)
	if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
		t.Fatal(err)
	}
	fx.heartbeat("A", time.Hour)
	leases := fx.leases("A")
	if len(leases) != outbox.Partitions {
		t.Fatalf("relay A holds %d leases, want %d", len(leases), outbox.Partitions)
	}
	writeRows(fx, rows)
	if analyzed {
		for _, table := range []string{fx.store.Table.Events(), fx.store.Table.Leases()} {
			if _, err := fx.db.Exec("ANALYZE " + table); err != nil {
				t.Fatal(err)
			}
		}
	}
	pfx := &planFixture{storeFixture: fx, leases: leases}
	pfx.readSeqs()
	if len(pfx.seqs) != rows {
		t.Fatalf("read %d seqs of %d rows", len(pfx.seqs), rows)
	}
	return pfx
}

// readSeqs reads the seqs of the fixture's rows into fx.seqs.
func (fx *planFixture) readSeqs() {
	fx.t.Helper()
	fx.seqs = fx.seqs[:0]
	rs, err := fx.db.Query("SELECT seq FROM " + fx.store.Table.Events() + " ORDER BY seq")
	if err != nil {
		fx.t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var seq int64
		if err := rs.Scan(&seq); err != nil {
			fx.t.Fatal(err)
		}
		fx.seqs = append(fx.seqs, seq)
	}
	if err := rs.Err(); err != nil {
		fx.t.Fatal(err)
	}
}

// writeRows writes rows events over 1,000 keys into the fixture's table, in one transaction.
func writeRows(fx *storeFixture, rows int) {
	fx.t.Helper()
	events := make([]outbox.Event, rows)
	for i := range events {
		events[i] = outbox.Event{Topic: "t", AggregateType: "order", AggregateID: fmt.Sprintf("order-%d", i%1000),
			EventType: "Happened", Payload: []byte("{}")}
	}
	tx, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		fx.t.Fatal(err)
	}
	for start := 0; start < rows; start += 1000 {
		if err := fx.writer.WriteTx(fx.ctx, tx, events[start:min(start+1000, rows)]...); err != nil {
			fx.t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		fx.t.Fatal(err)
	}
}

// records returns the fixture's rows as the records a batch carries.
func (fx *planFixture) records() []relay.Record {
	out := make([]relay.Record, len(fx.seqs))
	rs, err := fx.db.Query("SELECT seq, key_hash, partition_no FROM " + fx.store.Table.Events() + " ORDER BY seq")
	if err != nil {
		fx.t.Fatal(err)
	}
	defer rs.Close()
	for i := 0; rs.Next(); i++ {
		if err := rs.Scan(&out[i].Seq, &out[i].KeyHash, &out[i].Partition); err != nil {
			fx.t.Fatal(err)
		}
	}
	if err := rs.Err(); err != nil {
		fx.t.Fatal(err)
	}
	return out
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan tree.
type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Loops    float64    `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

// scansOf returns how many times the plan of q, run in a transaction rolled back afterwards,
// scanned table, over all its nodes that read it, and those nodes' types.
func (fx *planFixture) scansOf(q sqlstore.Query, table string) (float64, []string) {
	fx.t.Helper()
	tx, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		fx.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var out string
	if err := tx.QueryRowContext(fx.ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q.SQL, q.Args...).Scan(&out); err != nil {
		fx.t.Fatalf("explain %s: %v", q.SQL, err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
		fx.t.Fatalf("read the plan of %s: %v", q.SQL, err)
	}
	var loops float64
	var kinds []string
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.Relation == table && strings.Contains(n.NodeType, "Scan") {
			loops += n.Loops
			kinds = append(kinds, n.NodeType)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return loops, kinds
}

// TestAckFencedReadsTheBatchOnce: the one-statement acknowledgement of a batch of rows in many
// partitions looks its rows up once, by index. With the owned partitions as an IN (SELECT ...)
// join, the planner, which expected one owned lease of a lease table not analyzed yet, looked
// the whole batch up again for each owned partition.
func TestAckFencedReadsTheBatchOnce(t *testing.T) {
	fx := newPlanFixture(t, 100000, false)
	if _, err := fx.db.Exec("ANALYZE " + fx.store.Table.Events()); err != nil {
		t.Fatal(err)
	}
	batch := fx.seqs[:1000]
	q := fx.store.SQL().CDC().AckFenced("A", leaseArraysOf(fx.leases), leaseEpochsOf(fx.leases), batch, false)
	scans, kinds := fx.scansOf(q, fx.store.Table.Events())
	if scans != 1 {
		t.Fatalf("acknowledging %d rows of %d partitions scanned the events %v times, want once", len(batch), outbox.Partitions, scans)
	}
	if len(kinds) != 1 || !strings.Contains(kinds[0], "Index") && kinds[0] != "Bitmap Heap Scan" {
		t.Fatalf("acknowledging %d rows of %d read the events with %v, want a lookup by index", len(batch), len(fx.seqs), kinds)
	}
}

// TestBatchStatementsKeepAGenericPlan: the statements a relay sends for every batch of the
// stream (admit, the one-statement acknowledgement that deletes or retains, mark for retry) stop
// being planned for each batch's arrays
// once prepared on a connection: PostgreSQL settles on their generic plan.
func TestBatchStatementsKeepAGenericPlan(t *testing.T) {
	fx := newPlanFixture(t, 20000, true)
	recs := fx.records()
	cdc := fx.store.SQL().CDC()
	parts, epochs := leaseArraysOf(fx.leases[:2]), leaseEpochsOf(fx.leases[:2])
	statements := map[string]sqlstore.Query{
		"admit": cdc.Admit([]int64{recs[0].Seq, recs[1].Seq}, []int64{int64(recs[0].Partition)}, []int64{recs[0].KeyHash}),
		// seqs of no row: planned and run, nothing changed
		"ackFenced":         cdc.AckFenced("A", parts, epochs, []int64{-1, -2}, false),
		"ackFenced(retain)": cdc.AckFenced("A", parts, epochs, []int64{-1, -2}, true),
		"markRetry":         cdc.MarkRetry("A", parts, epochs, []int64{-1, -2}, []int64{1, 2}),
	}
	conn, err := fx.db.Conn(fx.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	for name, q := range statements {
		for range 8 {
			if err := runToEnd(fx.ctx, conn, q); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		var generic, custom int64
		if err := conn.QueryRowContext(fx.ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
			q.SQL).Scan(&generic, &custom); err != nil {
			t.Fatalf("%s: read its plan counts (was it prepared on the connection?): %v", name, err)
		}
		if generic == 0 {
			t.Errorf("%s was planned for its arguments at each of its %d executions, never with its generic plan", name, custom)
		}
	}
}

// runToEnd runs q on conn and reads its rows to the end.
func runToEnd(ctx context.Context, conn *sql.Conn, q sqlstore.Query) error {
	rows, err := conn.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

func leaseArraysOf(leases []relay.Lease) []int32 { parts, _ := relay.LeaseArrays(leases); return parts }

func leaseEpochsOf(leases []relay.Lease) []int64 {
	_, epochs := relay.LeaseArrays(leases)
	return epochs
}
