package relay

// SharePolicy is how the relays of a lease group share its partitions: how many each aims to
// own, and the granule partitions are taken and given up in. The wiring picks one
// (internal/lease: PerPartition, Units, Target) and the lease keeper hands it to the heartbeat
// (Store.Rebalance, Store.Acquire), which asks it and never looks at the delivery mode.
type SharePolicy interface {
	// Share is the number of partitions a relay aims at among relays live relays (at least 1).
	Share(relays int) int
	// Whole splits partitions into those of granules all of whose partitions are listed,
	// ordered granule by granule, and the others: only whole granules are taken and kept.
	Whole(partitions []int) (whole, partial []int)
	// Candidates is how many free partitions (in ascending order) to read to take up to n
	// whole granules' worth of them.
	Candidates(n int) int
	// Incoming says whether partitions are on their way to a relay with holding h, so that it
	// looks for them between heartbeats (internal/lease).
	Incoming(h Holding) bool
}
