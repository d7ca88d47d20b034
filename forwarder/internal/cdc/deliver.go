package cdc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// errLeasesLost: the streaming relay no longer owns every partition of the group (another
// relay took some over after this one stalled); it stops streaming without confirming.
var errLeasesLost = errors.New("cdc: this relay no longer owns every partition of the lease group")

// allLeases returns this relay's leases when it owns every partition, or errLeasesLost.
func (s *Source) allLeases(ctx context.Context) ([]relay.Lease, error) {
	leases, err := s.core.Store.LiveLeases(ctx, s.core.DB, s.core.RelayID, 0, 1)
	if err != nil {
		return nil, err
	}
	if len(leases) != outbox.Partitions {
		return nil, fmt.Errorf("%w (it owns %d of %d)", errLeasesLost, len(leases), outbox.Partitions)
	}
	return leases, nil
}

// streamBatch publishes the streamed records that are still pending and whose key is free, and
// leaves those of parked keys to the retry path (marking them). Records no longer pending
// (already published by the drain, or replayed after a restart) are dropped.
func (s *Source) streamBatch(ctx context.Context, worker int, leases []relay.Lease, b batch) error {
	records := b.records
	if len(records) == 0 {
		return nil
	}
	admitted, err := s.admitVisible(ctx, b)
	if err != nil {
		return err
	}
	publish := records[:0:0]
	var passed []relay.Record
	for _, r := range records {
		if admitted[r.Seq] {
			publish = append(publish, r)
		} else {
			passed = append(passed, r)
		}
	}
	if len(passed) > 0 {
		n, lost, err := s.markForRetry(ctx, worker, relay.LeasesOf(leases, passed, 0), passed)
		s.metrics.skipped.Add(float64(n))
		if lost > 0 {
			s.core.Metrics.FencedRows.Add(float64(lost))
		}
		if err != nil {
			return err
		}
	}
	if len(publish) == 0 {
		return nil
	}
	s.core.Metrics.BatchSize.Observe(float64(len(publish)))
	return s.deliver(ctx, worker, leases, publish)
}

// visibleWait bounds how long a batch waits for its transactions to become visible.
const visibleWait = 30 * time.Second

// admitVisible runs admit on the batch. Rows it does not find were either handled already or
// belong to transactions that committed but are not visible yet: for those, it waits until the
// transactions have ended and asks again.
func (s *Source) admitVisible(ctx context.Context, b batch) (map[int64]bool, error) {
	admitted, found, err := s.core.Store.Admit(ctx, s.core.DB, b.records)
	if err != nil || len(found) == len(b.records) {
		return admitted, err
	}
	var missing []relay.Record
	seen := map[uint32]bool{}
	var xids []string
	for i, r := range b.records {
		if found[r.Seq] {
			continue
		}
		missing = append(missing, r)
		if x := b.xids[i]; !seen[x] {
			seen[x] = true
			xids = append(xids, strconv.FormatUint(uint64(x), 10))
		}
	}
	deadline := time.Now().Add(visibleWait)
	for {
		running, err := s.core.Store.TransactionsRunning(ctx, s.core.DB, xids)
		if err != nil {
			return nil, err
		}
		if !running {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("cdc: transactions %v decoded from the WAL were still not visible after %v", xids, visibleWait)
		}
		if !relay.Sleep(ctx, time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	again, _, err := s.core.Store.Admit(ctx, s.core.DB, missing)
	if err != nil {
		return nil, err
	}
	for seq := range again {
		admitted[seq] = true
	}
	return admitted, nil
}

// deliver has the deliverer deliver records, then marks those still pending (the later events
// of a key that failed in the batch, held back by publish) for the retry path.
//
// leases are every partition of the group (the streamer owns them all); only those of the
// records' partitions are held and fenced, so that the workers' acknowledgements, whose records
// are in disjoint partitions, do not lock the same lease rows (FOR UPDATE) and wait for each
// other's commit. A record of a partition left out would count as fenced off, so every
// record's partition is in the set.
//
// The delivery mode's Config.Scope says which leases to hold (with ExactlyOnce, those of the
// records' whole units), and the deliverer delivers.
func (s *Source) deliver(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) error {
	s.core.Inflight.Read(worker)
	held := s.core.Inflight.Hold(worker, s.cfg.Scope(leases, records))
	defer s.core.Inflight.End(held)
	token := s.core.Progress.Begin()
	o, err := s.deliverer.Deliver(ctx, worker, held, records)
	s.core.Progress.Delivered(token, o, err)
	if err != nil || o.AllAcknowledged(len(records)) {
		return err // every record acknowledged: nothing left pending to mark
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relay.AckTimeout)
	defer cancel()
	// The rows of a partition lost meanwhile were counted as fenced by the acknowledgement.
	_, _, err = s.markForRetry(mctx, worker, held, records)
	return err
}

// markForRetry leaves the still pending, unmarked rows among records to the retry path, fenced
// by leases (Store.MarkRetry). When some of the records' partitions are no longer this relay's,
// their rows are left alone (to the new owner, which streams them again from the confirmed
// position) and the part fails with errLeasesLost, so that nothing after it is confirmed and
// the session ends. It returns how many rows it marked and how many it left to the new owner.
func (s *Source) markForRetry(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (marked int64, lost int, err error) {
	marked, owned, err := s.core.Store.MarkRetry(ctx, s.core.DB, s.core.RelayID, leases, records)
	if err != nil {
		return 0, 0, err
	}
	parts := map[int]bool{}
	for _, r := range records {
		if !owned[r.Partition] {
			lost++
			parts[r.Partition] = true
		}
	}
	if lost == 0 {
		return marked, 0, nil
	}
	s.core.Log.Warn("cdc: lost the lease of partitions before leaving rows to the retry path: they are left to the new owner",
		"slot", s.slot, "worker", worker, "partitions", len(parts), "rows", lost)
	return marked, lost, fmt.Errorf("%w: %d rows of %d partitions not left to the retry path", errLeasesLost, lost, len(parts))
}

// poll claims one batch from the table with claim (over every partition) and delivers it; it
// returns the number of rows claimed.
func (s *Source) poll(ctx context.Context, claim func(partitions []int) ([]relay.Record, error)) (int, error) {
	leases, err := s.allLeases(ctx)
	if err != nil {
		return 0, err
	}
	parts := make([]int, len(leases))
	for i, l := range leases {
		parts[i] = l.Partition
	}
	records, err := claim(parts)
	if err != nil || len(records) == 0 {
		return 0, err
	}
	s.core.Metrics.BatchSize.Observe(float64(len(records)))
	return len(records), s.deliver(ctx, 0, leases, records)
}

// retryPass releases the due scheduled events (releaseDue), then publishes the due rows the
// stream left to the retry path, in sequence order, until none is left. A failed release holds
// back only the scheduled events: it is warned about (once a minute, as on the polling source;
// a table not yet migrated to v11 fails it at every pass) and the session goes on.
func (s *Source) retryPass(ctx context.Context) error {
	if err := s.releaseDue(ctx); err != nil && ctx.Err() == nil && s.releaseWarn.Allow() {
		s.core.Log.Warn("releasing due scheduled events failed; they stay scheduled, the other events flow (run outboxkit migrate if the table has no deliver_at column)",
			"slot", s.slot, "error", err)
	}
	for ctx.Err() == nil {
		n, err := s.poll(ctx, func(parts []int) ([]relay.Record, error) {
			return s.core.Store.ClaimRetry(ctx, s.core.DB, parts, s.core.BatchSize, s.core.MaxBatchBytes)
		})
		if err != nil {
			return fmt.Errorf("cdc: retry path: %w", err)
		}
		if n < s.core.BatchSize {
			return nil
		}
	}
	return nil
}

// releaseDue releases the due scheduled events, BatchSize at a time, until none is due. The
// stream sees a scheduled row's insert with status 4 and does not admit it; the release writes
// the row again (Store.ReleaseDueByWrite), so the stream carries it at the release's commit and
// publishes it as any insert: after the events of its key the stream had before, parked with
// its key, in sequence order with the events of its key released with it. Published by the
// stream, a released event needs no new rule for per-key order, parking or fencing.
func (s *Source) releaseDue(ctx context.Context) error {
	for ctx.Err() == nil {
		n, err := s.core.Store.ReleaseDueByWrite(ctx, s.core.DB, s.core.BatchSize)
		if err != nil || n < int64(s.core.BatchSize) {
			return err
		}
	}
	return nil
}
