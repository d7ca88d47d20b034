package relay

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
)

// ReleaseDueByWrite releases up to limit due scheduled events of the relay's tenants for the cdc
// source, in a short transaction of its own, by writing each row again (sqlstore.CDC.ReleaseDue):
// the stream carries the new insert at the release's commit and publishes it like any streamed
// event. It returns the number of rows released. Like ReleaseDue, it needs no lease fence: a
// released row is an ordinary pending row, which only the streaming relay publishes.
func (s *Store) ReleaseDueByWrite(ctx context.Context, db *sql.DB, limit int) (int64, error) {
	var n int64
	err := sqlstore.InTx(ctx, db, func(tx *sql.Tx) error {
		var err error
		n, err = s.ReleaseDueByWriteIn(ctx, tx, limit)
		return err
	})
	return n, err
}

// ReleaseDueByWriteIn is ReleaseDueByWrite's two statements through q, a transaction.
func (s *Store) ReleaseDueByWriteIn(ctx context.Context, q Querier, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	cdc := s.SQL().CDC()
	seqs, err := s.Planned(cdc.ReleaseDue(limit)).Ints(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("cdc: write the due scheduled events again: %w", err)
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	released := make([]int64, len(seqs))
	for i, seq := range seqs {
		released[i] = int64(seq)
	}
	if _, err := cdc.ReleaseRows(released).Exec(ctx, q); err != nil {
		return 0, fmt.Errorf("cdc: release %d due scheduled events: %w", len(released), err)
	}
	return int64(len(released)), nil
}
