package forwarder

import (
	"context"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// Partitions move between relays when one starts or stops: the relay above its share releases
// some at a heartbeat of its own (once no batch of its is in flight on them), and a relay below
// its share takes them at a heartbeat of its own. With heartbeats alone, a moving partition
// waits for both, up to two HeartbeatIntervals, and its events wait with it. So while a move
// is under way the two sides step faster: a relay with partitions draining runs its heartbeat
// every quick step until they are released, and a relay expecting partitions (incoming) looks
// for free ones every quick step, taking them as a heartbeat would, by lease row locks skipped
// when held and an epoch increment. Only the timing changes: releases still wait for the batches
// in flight, takeovers still fence the previous owner.

// quickSteps is how many quick steps fit in a HeartbeatInterval while partitions move.
const quickSteps = 25

// heartbeat renews and rebalances the leases, never releasing a partition under this relay's
// own batch in flight.
func (f *Forwarder) heartbeat(ctx context.Context) (relay.Holding, error) {
	var releasing []int
	rebalanced := false
	held, err := f.store.Rebalance(ctx, f.cfg.DB, f.cfg.RelayID, f.cfg.LeaseTTL, f.share, func(surplus []int) []int {
		rebalanced = true
		releasing = f.inflight.Rebalance(surplus)
		return releasing
	})
	if !rebalanced {
		f.inflight.Rebalance(nil)
	}
	f.inflight.Released(releasing)
	return held, err
}

// heartbeatLoop runs a heartbeat every HeartbeatInterval, and quick steps between them while
// partitions move (see above); held is the holding after the start's heartbeat.
func (f *Forwarder) heartbeatLoop(ctx context.Context, held relay.Holding) {
	quick := max(f.cfg.MinPollInterval, f.cfg.HeartbeatInterval/quickSteps)
	due := time.Now().Add(f.cfg.HeartbeatInterval)
	for {
		draining := f.inflight.HasDraining()
		wait := time.Until(due)
		if draining || f.share.Incoming(held) {
			wait = min(wait, quick)
		}
		if !sleep(ctx, wait) {
			return
		}
		if !draining && time.Now().Before(due) {
			held = f.takeIncoming(ctx, held)
			continue
		}
		due = time.Now().Add(f.cfg.HeartbeatInterval)
		h, err := f.heartbeat(ctx)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("lease heartbeat failed", "error", err)
			}
			continue
		}
		if h.Owned > held.Owned {
			f.wakeWorkers()
		}
		held = h
		f.metrics.OwnedPartitions.Set(float64(h.Owned))
	}
}

// takeIncoming is a quick step of a relay expecting partitions: it takes free or expired ones
// up to its share, and wakes the workers when it took some.
func (f *Forwarder) takeIncoming(ctx context.Context, held relay.Holding) relay.Holding {
	if !f.share.Incoming(held) {
		return held
	}
	taken, err := f.store.Acquire(ctx, f.cfg.DB, f.cfg.RelayID, held.Share-held.Owned, f.cfg.LeaseTTL, f.share)
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("taking partitions between heartbeats failed", "error", err)
		}
		return held
	}
	if taken > 0 {
		held.Owned += taken
		f.metrics.OwnedPartitions.Set(float64(held.Owned))
		f.wakeWorkers()
	}
	return held
}

// wakeWorkers tells the polling workers that partitions were taken (Forwarder.leasesTaken).
func (f *Forwarder) wakeWorkers() {
	select {
	case f.leasesTaken <- struct{}{}:
	default:
	}
}
