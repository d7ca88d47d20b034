package forwarder

import (
	"database/sql"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// TestBacklogGetsNewPlans: the statements a relay sends on the events for every batch keep one
// generic plan per connection, and a generic plan made while the outbox table fits in a page
// reads the whole table. When a batch shows a backlog (the polling claim's result, the cdc
// admit's batch), the relay has them planned again on the table as it is then, so the backlog is
// looked up by index instead of read whole for every batch until autovacuum analyzes the table
// (here never: autovacuum is off for it).
func TestBacklogGetsNewPlans(t *testing.T) {
	fx := newPlanFixture(t, 50, true)
	fx.db.SetMaxOpenConns(1) // every statement on the one connection that keeps its plans
	if _, err := fx.db.Exec("ALTER TABLE " + fx.store.Table.Events() + " SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	statements := fx.batchStatements()
	// The steady state of a relay that keeps up: batches of a few rows, on a small table.
	small := fx.records()[:2]
	for _, st := range statements {
		for range 8 {
			if err := inRolledBackTx(fx.storeFixture, func(tx *sql.Tx) error { return st.run(tx, small) }); err != nil {
				t.Fatalf("%s of a small batch: %v", st.name, err)
			}
		}
	}
	writeRows(fx.storeFixture, 100000)
	fx.readSeqs()
	large := fx.records()[:1000]
	flows := map[string][]string{
		// a polling batch: its claim learns from its result that the batch is large; the
		// next claim and the batch's other statements run on new plans
		"polling": {"claim", "ack", "ackFenced", "fail", "eventIDs"},
		// a cdc batch: the admit sees the batch's size before it runs
		"cdc": {"admit", "markRetry", "ackFenced"},
	}
	for flow, names := range flows {
		fx.store.Plans = relay.Replanner{} // generation 0 again: the plans made on the small table
		if flow == "polling" {
			if err := inRolledBackTx(fx.storeFixture, func(tx *sql.Tx) error { return statements["claim"].run(tx, large) }); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range names {
			scans, err := fx.seqScansOf(func(tx *sql.Tx) error { return statements[name].run(tx, large) })
			if err != nil {
				t.Fatalf("%s: %s of a batch of %d rows: %v", flow, name, len(large), err)
			}
			if scans != 0 {
				t.Errorf("%s: %s of a batch of %d rows read the whole table of %d rows %d times with the plan made on 50 rows",
					flow, name, len(large), len(fx.seqs), scans)
			}
		}
	}
	fx.requireGenerations(len(statements))
}

// batchStatement is one of the statements a relay sends on the events for every batch.
type batchStatement struct {
	name string
	run  func(q relay.Querier, recs []relay.Record) error
}

func (fx *planFixture) batchStatements() map[string]batchStatement {
	partitions := make([]int, len(fx.leases))
	for i, l := range fx.leases {
		partitions[i] = l.Partition
	}
	none := []int64{-1, -2}
	list := []batchStatement{
		{"claim", func(q relay.Querier, recs []relay.Record) error {
			_, err := fx.store.Claim(fx.ctx, q, partitions, len(recs), 1<<30)
			return err
		}},
		{"admit", func(q relay.Querier, recs []relay.Record) error {
			_, _, err := fx.store.Admit(fx.ctx, q, recs)
			return err
		}},
		{"markRetry", func(q relay.Querier, recs []relay.Record) error {
			_, _, err := fx.store.MarkRetry(fx.ctx, q, "A", fx.leases, recs)
			return err
		}},
		{"ackFenced", func(q relay.Querier, recs []relay.Record) error {
			_, err := fx.store.AckFenced(fx.ctx, q, "A", fx.leases, seqsOf(recs, none), false)
			return err
		}},
		{"ack", func(q relay.Querier, recs []relay.Record) error {
			return fx.store.Ack(fx.ctx, q, seqsOf(recs, none), false)
		}},
		{"fail", func(q relay.Querier, recs []relay.Record) error {
			return fx.store.Fail(fx.ctx, q, recs[len(recs)-1].Seq, 1, time.Now().Add(time.Hour), false, "test")
		}},
		{"eventIDs", func(q relay.Querier, recs []relay.Record) error {
			_, err := fx.store.EventIDs(fx.ctx, q, seqsOf(recs, none))
			return err
		}},
	}
	out := map[string]batchStatement{}
	for _, st := range list {
		out[st.name] = st
	}
	return out
}

// seqScansOf runs fn in a transaction rolled back afterwards and returns how many times it read
// the events table whole.
func (fx *planFixture) seqScansOf(fn func(tx *sql.Tx) error) (int64, error) {
	var scans int64
	err := inRolledBackTx(fx.storeFixture, func(tx *sql.Tx) error {
		before, err := fx.seqScans(tx)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		after, err := fx.seqScans(tx)
		scans = after - before
		return err
	})
	return scans, err
}

// requireGenerations fails unless the connection holds statements of a later plan generation,
// at least want of them.
func (fx *planFixture) requireGenerations(want int) {
	fx.t.Helper()
	var n int
	if err := fx.db.QueryRowContext(fx.ctx, "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE $1",
		"/* plans %").Scan(&n); err != nil {
		fx.t.Fatal(err)
	}
	if n < want {
		fx.t.Fatalf("the connection holds %d statements of a later plan generation, want at least %d", n, want)
	}
}

// seqsOf returns the seqs of recs, or otherwise when recs is small (a batch acknowledging nothing).
func seqsOf(recs []relay.Record, otherwise []int64) []int64 {
	if len(recs) < 10 {
		return otherwise
	}
	seqs := make([]int64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
	}
	return seqs
}

// inRolledBackTx runs fn in a transaction and rolls it back.
func inRolledBackTx(fx *storeFixture, fn func(tx *sql.Tx) error) error {
	tx, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// seqScans reads how many times the transaction read the events table whole.
func (fx *planFixture) seqScans(tx *sql.Tx) (int64, error) {
	var n int64
	err := tx.QueryRowContext(fx.ctx, "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = $1::regclass",
		fx.store.Table.Events()).Scan(&n)
	return n, err
}
