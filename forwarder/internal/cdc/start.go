package cdc

import (
	"context"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// ensureSlot creates the slot when it is missing or invalidated. Losing a slot loses nothing,
// since the table is drained before the new slot is streamed, but it is said loudly (log and
// metric) when the slot was in use: by this relay earlier, or invalidated by
// max_slot_wal_keep_size (wal_status lost).
func (s *Source) ensureSlot(ctx context.Context, conn *pgrepl.Conn) error {
	// At every session, not only at start: an old relay streaming the old slot during a rolling
	// upgrade is stopped later, and its slot must not pin WAL from then on.
	if err := s.retireLegacyNames(ctx); err != nil {
		s.core.Log.Warn("cdc: could not retire the replication slot or publication of an earlier version; retried at the next session",
			"error", err)
	}
	st, err := pgrepl.ReadSlot(ctx, s.core.DB, s.slot)
	if err != nil {
		return err
	}
	if st.Exists && st.WALStatus != "lost" {
		return nil
	}
	if st.Exists {
		s.metrics.slotLost.Inc()
		s.core.Log.Error("cdc: the replication slot was invalidated (max_slot_wal_keep_size): dropping and recreating it; "+
			"the events it missed are in the table and are drained from there", "slot", s.slot)
		if st.ActivePID != 0 {
			return fmt.Errorf("cdc: slot %s is invalidated but still active for PID %d", s.slot, st.ActivePID)
		}
		if err := pgrepl.DropSlot(ctx, s.core.DB, s.slot); err != nil {
			return err
		}
	} else if s.used {
		s.metrics.slotLost.Inc()
		s.core.Log.Error("cdc: the replication slot is gone (dropped while in use): recreating it; "+
			"the events it missed are in the table and are drained from there", "slot", s.slot)
	} else {
		s.core.Log.Warn("cdc: creating the replication slot (a slot lost before this relay started is recreated the same way; "+
			"the table is drained first)", "slot", s.slot)
	}
	// Drain state first: a relay dying between the two leaves the slot marked undrained.
	if err := s.core.Store.SetSlotDrained(ctx, s.core.DB, s.slot, false); err != nil {
		return err
	}
	_, err = pgrepl.CreateSlot(ctx, conn, s.slot)
	return err
}

// awaitAllLeases renews this relay's leases until it owns every partition of the group (the
// previous streamer's expire within LeaseTTL) and returns them; the reader keeps the stream
// alive meanwhile.
func (s *Source) awaitAllLeases(ctx context.Context, readErr chan error) ([]relay.Lease, error) {
	for {
		if _, err := s.heartbeat(ctx); err != nil {
			s.core.Log.Warn("cdc: taking the partitions failed", "error", err)
		}
		leases, err := s.core.Store.LiveLeases(ctx, s.core.DB, s.core.RelayID, 0, 1)
		if err == nil && len(leases) == outbox.Partitions {
			return leases, nil
		}
		select {
		case err := <-readErr:
			readErr <- err // for the session's stop
			return nil, err
		default:
		}
		if !relay.Sleep(ctx, s.cfg.HeartbeatInterval/2) {
			return nil, ctx.Err()
		}
	}
}

// drainIfNeeded drains the table when the slot is not marked drained (it was just created, or
// its creator died before draining): the rows committed before the slot existed are only in the
// table. It marks the later events of parked keys for the retry path, publishes the pending
// rows up to the highest seq it saw (in seq order, which is commit order per key when the
// writers take key locks), and then records the slot as drained. Rows it publishes that the
// stream also shows are dropped there (admit).
func (s *Source) drainIfNeeded(ctx context.Context) error {
	drained, err := s.core.Store.SlotDrained(ctx, s.core.DB, s.slot)
	if err != nil || drained {
		return err
	}
	horizon, err := s.core.Store.MaxSeq(ctx, s.core.DB)
	if err != nil {
		return err
	}
	if _, err := s.core.Store.MarkParkedUpTo(ctx, s.core.DB, horizon); err != nil {
		return err
	}
	total := 0
	for ctx.Err() == nil {
		n, err := s.poll(ctx, func(parts []int) ([]relay.Record, error) {
			return s.core.Store.ClaimUpTo(ctx, s.core.DB, parts, s.core.BatchSize, s.core.MaxBatchBytes, horizon)
		})
		if err != nil {
			return fmt.Errorf("cdc: drain the table up to seq %d: %w", horizon, err)
		}
		total += n
		if n == 0 {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.core.Log.Info("cdc: drained the rows committed before the slot existed", "slot", s.slot, "rows", total, "up_to_seq", horizon)
	return s.core.Store.SetSlotDrained(ctx, s.core.DB, s.slot, true)
}
