package forwarder

import (
	"context"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
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

// incoming says whether partitions are on their way to a relay with holding h: it is below its
// share, and the other relays hold more than their shares together (some partitions are free,
// or a relay above its share releases them at its next heartbeat). A relay below its share
// only because the partitions do not divide evenly expects nothing. Policies with a target
// (the cdc source) take their partitions by heartbeats.
func (p sharePolicy) incoming(h holding) bool {
	if p.target != nil || h.owned >= h.share || h.relays < 1 {
		return false
	}
	return outbox.Partitions-h.owned > (h.relays-1)*h.share
}

// heartbeat renews and rebalances the leases, never releasing a partition under this relay's
// own batch in flight.
func (f *Forwarder) heartbeat(ctx context.Context) (holding, error) {
	var releasing []int
	rebalanced := false
	held, err := f.store.rebalance(ctx, f.cfg.DB, f.cfg.RelayID, f.cfg.LeaseTTL, f.share, func(surplus []int) []int {
		rebalanced = true
		releasing = f.inflight.rebalance(surplus)
		return releasing
	})
	if !rebalanced {
		f.inflight.rebalance(nil)
	}
	f.inflight.released(releasing)
	return held, err
}

// heartbeatLoop runs a heartbeat every HeartbeatInterval, and quick steps between them while
// partitions move (see above); held is the holding after the start's heartbeat.
func (f *Forwarder) heartbeatLoop(ctx context.Context, held holding) {
	quick := max(f.cfg.MinPollInterval, f.cfg.HeartbeatInterval/quickSteps)
	due := time.Now().Add(f.cfg.HeartbeatInterval)
	for {
		draining := f.inflight.hasDraining()
		wait := time.Until(due)
		if draining || f.share.incoming(held) {
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
		if h.owned > held.owned {
			f.wakeWorkers()
		}
		held = h
		f.metrics.ownedPartitions.Set(float64(h.owned))
	}
}

// takeIncoming is a quick step of a relay expecting partitions: it takes free or expired ones
// up to its share, and wakes the workers when it took some.
func (f *Forwarder) takeIncoming(ctx context.Context, held holding) holding {
	if !f.share.incoming(held) {
		return held
	}
	taken, err := f.store.acquire(ctx, f.cfg.DB, f.cfg.RelayID, held.share-held.owned, f.cfg.LeaseTTL, f.share)
	if err != nil {
		if ctx.Err() == nil {
			f.log.Warn("taking partitions between heartbeats failed", "error", err)
		}
		return held
	}
	if taken > 0 {
		held.owned += taken
		f.metrics.ownedPartitions.Set(float64(held.owned))
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
