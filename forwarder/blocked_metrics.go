package forwarder

import (
	"context"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// updateBlockedGauges reads the blocked keys of the whole table (every tenant, as the other
// table gauges) and sets the gauges; a failed read leaves them as they were.
func (f *Forwarder) updateBlockedGauges(ctx context.Context) {
	counts, oldest, err := relay.BlockedSummary(ctx, f.cfg.DB, f.store.SQL())
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("reading the blocked keys failed", "error", err)
		}
		return
	}
	g := f.metrics.Blocked
	g.Keys.WithLabelValues(bookkeeping.StateDead).Set(float64(counts[relay.StatusDead]))
	g.Keys.WithLabelValues(bookkeeping.StateRetrying).Set(float64(counts[relay.StatusPending]))
	age := 0.0
	if !oldest.IsZero() {
		age = max(time.Since(oldest).Seconds(), 0)
	}
	g.Oldest.Set(age)
}
