package wal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The drain publishes the parked events from the table, every RetryInterval while keys are
// parked, through the forwarder's own deliverer and acknowledger: the polling claim (a key's
// rows in seq order, a key held back while its failed row is not due or is dead), retries with
// backoff, dead letters, all fenced by the lease epochs. After each pass it reads which keys
// still have rows (refresh, under the key fence): a key with none streams directly again.
//
// The barrier: the drain starts only once the stream has passed this session's barrier, the
// server's WAL position when the session started, after it owns every lease (a commit at or
// after it, or a keepalive saying the server sent everything before it; the reader asks for one
// while it waits). The
// stream restarts from the slot's confirmed position, so it may hand over again events that an
// earlier session parked but did not confirm (a relay killed between parking and confirming).
// Before the barrier, such an event's row is still in the table (nothing deletes it yet), so
// parking it again finds it and writes nothing (Park's NOT EXISTS on the event id); once the
// drain published and deleted it, the stream would write it again behind its key's later rows.

// drainLoop runs drainPass every RetryInterval, once the barrier is passed, until ctx ends or a
// pass finds the leases lost (reported on errs: the session stops). Any other failed pass (a
// dropped pool connection, a database restarting) is logged, at most once a minute, and retried
// at the next tick: the stream needs no database, and a restarted session would stream again
// from the slot's confirmed position.
func (s *Source) drainLoop(ctx context.Context, p *parked, barrier <-chan struct{}, errs chan<- error) {
	if !s.hooks().NoBarrier {
		run(s.hooks().BarrierWait)
		select {
		case <-ctx.Done():
			return
		case <-barrier:
		}
	}
	t := time.NewTicker(s.cfg.RetryInterval)
	defer t.Stop()
	for {
		if err := s.drainPass(ctx, p); err != nil && ctx.Err() == nil {
			if errors.Is(err, errLeasesLost) {
				errs <- err
				return
			}
			if s.drainWarn.Allow() {
				s.core.Log.Warn("wal: a pass over the parked and scheduled events failed; retrying at the next pass",
					"slot", s.cfg.Slot, "error", err, "in", s.cfg.RetryInterval)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// drainPass releases the due scheduled rows, publishes the due parked and released rows, in
// seq order, until none is left, then refreshes the parked set. It claims nothing while no key
// is parked and no scheduled row came due.
//
// A scheduled row (status scheduled) does not park its key: ParkedKeys leaves it out, so the
// key's other events keep streaming while it waits (docs/scheduled.md, the ordering rule: a
// scheduled event leaves its key's order). Once released it is a pending row, published by
// the poll that follows; should it fail, the refresh parks its key like any failing row's.
func (s *Source) drainPass(ctx context.Context, p *parked) error {
	released, err := s.releaseDue(ctx)
	if err != nil {
		return err
	}
	p.lock()
	idle := p.empty()
	p.unlock()
	if idle && released == 0 {
		return nil
	}
	total := 0
	for ctx.Err() == nil {
		n, err := s.poll(ctx)
		if err != nil {
			return fmt.Errorf("wal: publish the parked events: %w", err)
		}
		total += n
		if n < s.core.BatchSize {
			break
		}
	}
	if err := s.refresh(ctx, p); err != nil {
		return err
	}
	// Parked keys are where an operator discards: prune the tombstones the slot has passed.
	if _, err := s.core.Store.PruneDiscarded(ctx, s.core.DB, s.cfg.Slot); err != nil {
		return err
	}
	if h := s.hooks().Drained; h != nil {
		h(total)
	}
	return nil
}

// poll claims one batch of parked rows over every partition and has the table's deliverer
// deliver it; it returns the number of rows claimed.
func (s *Source) poll(ctx context.Context) (int, error) {
	release, err := s.stream.drainTurn()
	if err != nil {
		return 0, err
	}
	defer release()
	s.core.Inflight.Read(0)
	leases, err := s.core.Store.LiveLeases(ctx, s.core.DB, s.core.RelayID, 0, 1)
	if err != nil || len(leases) != outbox.Partitions {
		s.core.Inflight.Hold(0, nil)
		if err == nil {
			err = fmt.Errorf("%w (it owns %d of %d)", errLeasesLost, len(leases), outbox.Partitions)
		}
		return 0, err
	}
	parts := make([]int, len(leases))
	for i, l := range leases {
		parts[i] = l.Partition
	}
	records, err := s.core.Store.Claim(ctx, s.core.DB, parts, s.core.BatchSize, s.core.MaxBatchBytes)
	if err != nil || len(records) == 0 {
		s.core.Inflight.Hold(0, nil)
		return 0, err
	}
	held := s.core.Inflight.Hold(0, s.scope(leases, records))
	defer s.core.Inflight.End(held)
	s.core.Metrics.BatchSize.Observe(float64(len(records)))
	token := s.core.Progress.Begin()
	o, err := s.table.Deliver(ctx, 0, held, records)
	s.core.Progress.Delivered(token, o, err)
	return len(records), err
}

// releaseDue releases the due scheduled rows of every partition, earliest first, up to a batch
// at a time until fewer than a batch came due (relay.Store.ReleaseDueIn: the release takes the
// same row locks as Writer.Cancel, so a committed cancel never lets its event out). It returns
// how many it released.
func (s *Source) releaseDue(ctx context.Context) (int64, error) {
	parts := make([]int, outbox.Partitions)
	for i := range parts {
		parts[i] = i
	}
	var total int64
	for ctx.Err() == nil {
		n, err := s.core.Store.ReleaseDueIn(ctx, s.core.DB, parts, s.core.BatchSize)
		if err != nil {
			return total, fmt.Errorf("wal: %w", err)
		}
		total += n
		if n < int64(s.core.BatchSize) {
			break
		}
	}
	return total, nil
}

// scope returns the leases the table's deliverer holds and fences for a delivery of records
// (Config.Scope): those of their whole transactional units with exactly-once delivery.
func (s *Source) scope(leases []relay.Lease, records []relay.Record) []relay.Lease {
	if s.cfg.Scope == nil {
		return relay.LeasesOf(leases, records, 0)
	}
	return s.cfg.Scope(leases, records)
}
