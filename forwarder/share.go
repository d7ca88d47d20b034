package forwarder

import "github.com/outboxkit/outboxkit/outbox"

// sharePolicy is how the relays of a lease group share its partitions: how many each aims to
// own, and the granule partitions are taken and given up in. New picks it once, from the
// delivery and the source; the lease SQL (store.heartbeat, store.acquire) takes it as an
// argument.
type sharePolicy struct {
	// units, when not 0, is the granule: the transactional units of exactly-once delivery (unit
	// u holds the partitions p with p % units == u), taken and given up whole.
	units int
	// target, when set, is the number of partitions to aim at whatever the number of relays (the
	// cdc source: all of them while this relay streams, none otherwise).
	target func(relays int) int
}

// share is the number of partitions a relay aims at among relays live relays: target's, or an
// equal share rounded up to whole granules.
func (p sharePolicy) share(relays int) int {
	relays = max(relays, 1)
	switch {
	case p.target != nil:
		return p.target(relays)
	case p.units > 0:
		return (p.units + relays - 1) / relays * (outbox.Partitions / p.units)
	}
	return (outbox.Partitions + relays - 1) / relays
}

// whole splits partitions into those of granules all of whose partitions are listed, ordered
// granule by granule, and the others. Single partitions are all whole.
func (p sharePolicy) whole(partitions []int) (whole, partial []int) {
	if p.units == 0 {
		return partitions, nil
	}
	per := outbox.Partitions / p.units
	byUnit := map[int][]int{}
	for _, part := range partitions {
		byUnit[part%p.units] = append(byUnit[part%p.units], part)
	}
	for u := range p.units {
		if len(byUnit[u]) == per {
			whole = append(whole, byUnit[u]...)
		} else {
			partial = append(partial, byUnit[u]...)
		}
	}
	return whole, partial
}
