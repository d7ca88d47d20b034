package cdc

import (
	"context"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
)

// The stall check: never silent about rows the stream does not deliver. A stream can run,
// and confirm its position, while delivering none of the outbox's rows: a publication that
// does not carry them (a row filter, a table recreated under an old publication), a decoder
// that does not recognise the relation. Those rows are neither published nor on the retry path;
// the slot has passed them, so no restart of the stream brings them back (dropping the slot
// does: the next relay drains the table).
//
// A row is stranded when it is pending, not on the retry path (no next attempt time: a failed
// or parked row is the retry path's and reported by the polling metrics), of this relay's
// tenants, and older than CDC.StallAfter (by the database's clock against created_at). The
// relay reports a stall when rows are stranded and the stream has delivered none of the table's
// rows for StallAfter, and no part of what it delivered is being published. A backlog being
// streamed is not a stall (rows arrive all the time), nor a slow broker (parts in flight), nor a
// row that waits behind its key's failure (it is on the retry path); a stream far behind on
// other tables' WAL that delivers nothing for StallAfter is reported, rightly: its rows wait.

// stallState is what the check found last.
type stallState struct {
	stalled bool
	checks  int // checks since the warning was last logged
}

// stallWarnEvery is how many checks pass between two warnings while a stall lasts.
const stallWarnEvery = 10

// stallLoop checks for a stall every StallAfter/3 while the session streams, until ctx ends;
// it clears the gauges when it returns (a relay that does not stream reports nothing).
func (s *Source) stallLoop(ctx context.Context) {
	every := max(s.cfg.StallAfter/3, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	var st stallState
	defer s.clearStall(&st)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.checkStall(ctx, &st); err != nil && ctx.Err() == nil {
			s.core.Log.Warn("cdc: the stall check failed", "slot", s.slot, "error", err)
		}
	}
}

// checkStall runs one check.
func (s *Source) checkStall(ctx context.Context, st *stallState) error {
	if s.activity.partsInFlight.Load() > 0 {
		// Busy publishing what the stream delivered: a slow or unreachable broker, reported by the
		// forwarder's own metrics, not a stream that delivers nothing.
		s.activity.lastDelivered.Store(time.Now().UnixNano())
	}
	silent := time.Since(time.Unix(0, s.activity.lastDelivered.Load()))
	if silent < s.cfg.StallAfter {
		s.clearStall(st)
		return nil
	}
	rows, oldest, err := s.core.Store.StrandedRows(ctx, s.core.DB, s.cfg.StallAfter)
	if err != nil {
		return err
	}
	if rows == 0 {
		s.clearStall(st)
		return nil
	}
	s.metrics.stalled.Set(1)
	s.metrics.strandedRows.Set(float64(rows))
	s.metrics.strandedAge.Set(oldest.Seconds())
	if st.stalled {
		if st.checks++; st.checks < stallWarnEvery {
			return nil
		}
	}
	st.stalled, st.checks = true, 0
	behind, err := pgrepl.SlotBehind(ctx, s.core.DB, s.slot)
	if err != nil {
		return err
	}
	s.core.Log.Warn("cdc: stream stalled: it has delivered none of the table's rows while pending rows wait, not on the retry path; "+
		"if the slot has passed them (stream_behind_bytes small), fix the publication and drop the slot "+
		"(outboxkit cdc drop-slot): the relay then drains the table (docs/cdc.md, Stalls)",
		"slot", s.slot, "rows", rows, // the relay's logger names the table
		"oldest", oldest.Round(time.Second),
		"silent_for", silent.Round(time.Second), "stream_behind_bytes", behind)
	return nil
}

// clearStall ends a reported stall: gauges to 0, and a line saying so.
func (s *Source) clearStall(st *stallState) {
	if st.stalled {
		s.core.Log.Info("cdc: the stall is over: no row is stranded any more, or the stream delivers again", "slot", s.slot)
	}
	*st = stallState{}
	s.metrics.stalled.Set(0)
	s.metrics.strandedRows.Set(0)
	s.metrics.strandedAge.Set(0)
}
