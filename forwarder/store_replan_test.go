package forwarder

import (
	"database/sql"
	"testing"
)

// TestBacklogGetsNewPlans: the statements a relay sends for every batch keep one generic plan per
// connection, and a generic plan made while the outbox table fits in a page reads the whole
// table. When the relay's batches show a backlog, it has them planned again on the table as it is
// then, so the backlog is looked up by index instead of read whole for every batch until
// autovacuum analyzes the table (here never: autovacuum is off for it).
func TestBacklogGetsNewPlans(t *testing.T) {
	fx := newPlanFixture(t, 50, true)
	fx.db.SetMaxOpenConns(1) // every statement on the one connection that keeps its plans
	if _, err := fx.db.Exec("ALTER TABLE " + fx.store.table.Events() + " SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	small := fx.records()[:2]
	partitions := make([]int, len(fx.leases))
	for i, l := range fx.leases {
		partitions[i] = l.partition
	}
	none := []int64{-1, -2}
	// The steady state of a relay that keeps up: batches of a few rows, on a small table.
	batches := map[string]func(q querier, recs []record) error{
		"admit": func(q querier, recs []record) error {
			_, _, err := fx.store.admit(fx.ctx, q, recs)
			return err
		},
		"ackFenced": func(q querier, recs []record) error {
			_, err := fx.store.ackFenced(fx.ctx, q, "A", fx.leases, seqsOf(recs, none), false)
			return err
		},
		"markRetry": func(q querier, recs []record) error {
			_, _, err := fx.store.markRetry(fx.ctx, q, "A", fx.leases, recs)
			return err
		},
		"claim": func(q querier, recs []record) error {
			_, err := fx.store.claim(fx.ctx, q, partitions, len(recs), 1<<30)
			return err
		},
	}
	for name, batch := range batches {
		for range 8 {
			if err := inRolledBackTx(fx.storeFixture, func(tx *sql.Tx) error { return batch(tx, small) }); err != nil {
				t.Fatalf("%s of a small batch: %v", name, err)
			}
		}
	}
	writeRows(fx.storeFixture, 100000)
	fx.readSeqs()
	large := fx.records()[:1000]
	for name, batch := range batches {
		var scans int64
		err := inRolledBackTx(fx.storeFixture, func(tx *sql.Tx) error {
			if name == "claim" { // the claim learns from its result that the batch is large
				if err := batch(tx, large); err != nil {
					return err
				}
			}
			before, err := fx.seqScans(tx)
			if err != nil {
				return err
			}
			if err := batch(tx, large); err != nil {
				return err
			}
			after, err := fx.seqScans(tx)
			scans = after - before
			return err
		})
		if err != nil {
			t.Fatalf("%s of a batch of %d rows: %v", name, len(large), err)
		}
		if scans != 0 {
			t.Errorf("%s of a batch of %d rows read the whole table of %d rows %d times with the plan made on %d rows",
				name, len(large), len(fx.seqs), scans, 50)
		}
	}
}

// seqsOf returns the seqs of recs, or otherwise when recs is small (a batch acknowledging nothing).
func seqsOf(recs []record, otherwise []int64) []int64 {
	if len(recs) < 10 {
		return otherwise
	}
	seqs := make([]int64, len(recs))
	for i, r := range recs {
		seqs[i] = r.seq
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
		fx.store.table.Events()).Scan(&n)
	return n, err
}
