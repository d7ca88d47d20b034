// Package lease keeps a relay's leases: the heartbeat that renews and rebalances them by the
// share policy, never releasing a partition under a batch of the relay's own in flight, and
// the quick steps while partitions move between relays.
package lease

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

// Keeper runs the heartbeats of one relay.
type Keeper struct {
	core relay.Core
	// share is the relay's share policy (SetShare).
	share relay.SharePolicy
	// heartbeatInterval and minPollInterval are Config's.
	heartbeatInterval, minPollInterval time.Duration
	// leasesTaken tells the polling workers that partitions were taken between heartbeats.
	leasesTaken chan<- struct{}
}

// New returns the keeper of core's leases under the share policy share.
func New(core relay.Core, share relay.SharePolicy, heartbeatInterval, minPollInterval time.Duration, leasesTaken chan<- struct{}) *Keeper {
	return &Keeper{core: core, share: share, heartbeatInterval: heartbeatInterval, minPollInterval: minPollInterval, leasesTaken: leasesTaken}
}

// SetShare replaces the share policy before the first heartbeat: exactly-once delivery settles
// its unit count at start, from the lease group's bookkeeping.
func (k *Keeper) SetShare(share relay.SharePolicy) { k.share = share }

// Share returns the share policy in force.
func (k *Keeper) Share() relay.SharePolicy { return k.share }

// Heartbeat renews and rebalances the leases, never releasing a partition under this relay's
// own batch in flight.
func (k *Keeper) Heartbeat(ctx context.Context) (relay.Holding, error) {
	var releasing []int
	rebalanced := false
	held, err := k.core.Store.Rebalance(ctx, k.core.DB, k.core.RelayID, k.core.LeaseTTL, k.share, func(surplus []int) []int {
		rebalanced = true
		releasing = k.core.Inflight.Rebalance(surplus)
		return releasing
	})
	if !rebalanced {
		k.core.Inflight.Rebalance(nil)
	}
	k.core.Inflight.Released(releasing)
	return held, err
}

// Loop runs a heartbeat every HeartbeatInterval, and quick steps between them while
// partitions move (see above); held is the holding after the start's heartbeat.
func (k *Keeper) Loop(ctx context.Context, held relay.Holding) {
	quick := max(k.minPollInterval, k.heartbeatInterval/quickSteps)
	due := time.Now().Add(k.heartbeatInterval)
	for {
		draining := k.core.Inflight.HasDraining()
		wait := time.Until(due)
		if draining || k.share.Incoming(held) {
			wait = min(wait, quick)
		}
		if !relay.Sleep(ctx, wait) {
			return
		}
		if !draining && time.Now().Before(due) {
			held = k.takeIncoming(ctx, held)
			continue
		}
		due = time.Now().Add(k.heartbeatInterval)
		h, err := k.Heartbeat(ctx)
		if err != nil {
			if ctx.Err() == nil {
				k.core.Log.Warn("lease heartbeat failed", "error", err)
			}
			continue
		}
		if h.Owned > held.Owned {
			k.wakeWorkers()
		}
		held = h
		k.core.Metrics.OwnedPartitions.Set(float64(h.Owned))
	}
}

// takeIncoming is a quick step of a relay expecting partitions: it takes free or expired ones
// up to its share, and wakes the workers when it took some.
func (k *Keeper) takeIncoming(ctx context.Context, held relay.Holding) relay.Holding {
	if !k.share.Incoming(held) {
		return held
	}
	taken, err := k.core.Store.Acquire(ctx, k.core.DB, k.core.RelayID, held.Share-held.Owned, k.core.LeaseTTL, k.share)
	if err != nil {
		if ctx.Err() == nil {
			k.core.Log.Warn("taking partitions between heartbeats failed", "error", err)
		}
		return held
	}
	if taken > 0 {
		held.Owned += taken
		k.core.Metrics.OwnedPartitions.Set(float64(held.Owned))
		k.wakeWorkers()
	}
	return held
}

// wakeWorkers tells the polling workers that partitions were taken (Keeper.leasesTaken).
func (k *Keeper) wakeWorkers() {
	select {
	case k.leasesTaken <- struct{}{}:
	default:
	}
}
