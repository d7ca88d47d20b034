package lease

import (
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The share policies (relay.SharePolicy): the wiring picks PerPartition for at-least-once
// delivery and Units for exactly-once, and wraps either in Target for the cdc source.

// PerPartition shares the partitions one by one: each relay aims at an equal share of them.
type PerPartition struct{}

// Share is an equal share of the partitions, rounded up.
func (PerPartition) Share(relays int) int {
	relays = max(relays, 1)
	return (outbox.Partitions + relays - 1) / relays
}

// Whole returns partitions as they are: single partitions are all whole.
func (PerPartition) Whole(partitions []int) (whole, partial []int) { return partitions, nil }

// Candidates is n: any n free partitions will do.
func (PerPartition) Candidates(n int) int { return n }

// Incoming is equalShareIncoming.
func (PerPartition) Incoming(h relay.Holding) bool { return equalShareIncoming(h) }

// Units shares the transactional units of exactly-once delivery, taken and given up whole:
// unit u holds the partitions p with p % Units == u. Units must divide outbox.Partitions
// (Config validation and the unit count's bookkeeping see to it).
type Units int

// Share is an equal share of the units, rounded up, in partitions.
func (n Units) Share(relays int) int {
	relays = max(relays, 1)
	units := int(n)
	return (units + relays - 1) / relays * (outbox.Partitions / units)
}

// Whole splits partitions into those of units all of whose partitions are listed, unit by
// unit in ascending unit order, and the others (also unit by unit).
func (n Units) Whole(partitions []int) (whole, partial []int) {
	units := int(n)
	per := outbox.Partitions / units
	byUnit := make(map[int][]int, units)
	for _, p := range partitions {
		byUnit[p%units] = append(byUnit[p%units], p)
	}
	for u := range units {
		if len(byUnit[u]) == per {
			whole = append(whole, byUnit[u]...)
		} else {
			partial = append(partial, byUnit[u]...)
		}
	}
	return whole, partial
}

// Candidates is every partition: whole units are picked from all the free ones.
func (Units) Candidates(int) int { return outbox.Partitions }

// Incoming is equalShareIncoming.
func (Units) Incoming(h relay.Holding) bool { return equalShareIncoming(h) }

// Target is a share of a fixed number of partitions whatever the number of relays, in the
// granules of the policy it wraps: the cdc source aims at all of them while this relay streams
// the slot, none otherwise.
type Target struct {
	// SharePolicy gives the granule (Whole, Candidates).
	relay.SharePolicy
	// Partitions is the number of partitions to aim at among relays live relays.
	Partitions func(relays int) int
}

// Share is t.Partitions(relays).
func (t Target) Share(relays int) int { return t.Partitions(max(relays, 1)) }

// Incoming is false: a target is taken by heartbeats.
func (Target) Incoming(relay.Holding) bool { return false }

// equalShareIncoming says whether partitions are on their way to a relay with holding h under
// an equal share: it is below its share, and the other relays hold more than their shares
// together (some partitions are free, or a relay above its share releases them at its next
// heartbeat). A relay below its share only because the partitions do not divide evenly expects
// nothing.
func equalShareIncoming(h relay.Holding) bool {
	if h.Owned >= h.Share || h.Relays < 1 {
		return false
	}
	return outbox.Partitions-h.Owned > (h.Relays-1)*h.Share
}
