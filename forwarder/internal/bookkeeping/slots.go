package bookkeeping

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
)

// SlotDrained reports whether the rows committed before the slot existed have been drained
// (false also when the slot has no row: a slot created by hand or by an older relay).
func SlotDrained(ctx context.Context, q sqlstore.Querier, c sqlstore.CDC, slot string) (bool, error) {
	var drained bool
	err := c.SlotDrained(slot).QueryRow(ctx, q).Scan(&drained)
	if err != nil {
		return false, fmt.Errorf("cdc: read the drain state of slot %s: %w", slot, err)
	}
	return drained, nil
}

// StrandedRows counts the pending rows of the statements' tenants that are not on the retry
// path and older than age, and returns the age of the oldest (PostgreSQL).
func StrandedRows(ctx context.Context, q sqlstore.Querier, c sqlstore.CDC, age time.Duration) (int64, time.Duration, error) {
	var n int64
	var oldest float64
	if err := c.StrandedRows(age).QueryRow(ctx, q).Scan(&n, &oldest); err != nil {
		return 0, 0, fmt.Errorf("cdc: count the stranded rows: %w", err)
	}
	return n, time.Duration(oldest * float64(time.Second)), nil
}
