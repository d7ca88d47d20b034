package relay

import "github.com/outboxkit/outboxkit/outbox"

// sharePolicy is how the relays of a lease group share its partitions: how many each aims to
// own, and the granule partitions are taken and given up in. New picks it once, from the
// delivery and the source; the lease SQL (store.heartbeat, store.acquire) takes it as an
// argument.
type SharePolicy struct {
	// units, when not 0, is the granule: the transactional units of exactly-once delivery (unit
	// u holds the partitions p with p % units == u), taken and given up whole.
	Units int
	// target, when set, is the number of partitions to aim at whatever the number of relays (the
	// cdc source: all of them while this relay streams, none otherwise).
	Target func(relays int) int
}

// share is the number of partitions a relay aims at among relays live relays: target's, or an
// equal share rounded up to whole granules.
func (p SharePolicy) Share(relays int) int {
	relays = max(relays, 1)
	switch {
	case p.Target != nil:
		return p.Target(relays)
	case p.Units > 0:
		return (p.Units + relays - 1) / relays * (outbox.Partitions / p.Units)
	}
	return (outbox.Partitions + relays - 1) / relays
}

// whole splits partitions into those of granules all of whose partitions are listed, ordered
// granule by granule, and the others. Single partitions are all whole.
func (p SharePolicy) Whole(partitions []int) (whole, partial []int) {
	if p.Units == 0 {
		return partitions, nil
	}
	per := outbox.Partitions / p.Units
	byUnit := map[int][]int{}
	for _, part := range partitions {
		byUnit[part%p.Units] = append(byUnit[part%p.Units], part)
	}
	for u := range p.Units {
		if len(byUnit[u]) == per {
			whole = append(whole, byUnit[u]...)
		} else {
			partial = append(partial, byUnit[u]...)
		}
	}
	return whole, partial
}

// incoming says whether partitions are on their way to a relay with holding h: it is below its
// share, and the other relays hold more than their shares together (some partitions are free,
// or a relay above its share releases them at its next heartbeat). A relay below its share
// only because the partitions do not divide evenly expects nothing. Policies with a target
// (the cdc source) take their partitions by heartbeats.
func (p SharePolicy) Incoming(h Holding) bool {
	if p.Target != nil || h.Owned >= h.Share || h.Relays < 1 {
		return false
	}
	return outbox.Partitions-h.Owned > (h.Relays-1)*h.Share
}
