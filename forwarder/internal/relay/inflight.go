package relay

import "sync"

// Inflight keeps a relay from fencing itself: when rebalancing gives partitions up, a partition
// with a batch of this relay in flight is not released at once (its acknowledgement would be
// refused and the new owner would publish the batch again). It is marked draining instead:
// workers claim no new rows of it, and a later heartbeat releases it once the batch is done.
//
// A worker announces itself (reading) before it reads its leases and holds the partitions it
// claims from (hold) until the batch is acknowledged (end); while a worker is reading, all of
// its share counts as busy. The partitions about to be released are draining too until the
// release has committed (released), so a worker that read its leases just before the release
// never claims from them.
type Inflight struct {
	mu       sync.Mutex
	Workers  int
	Reading  map[int]int // worker -> how many of its loops are between reading their leases and hold
	Busy     map[int]int // partition -> batches in flight
	Draining map[int]bool
}

func NewInflight(workers int) *Inflight {
	return &Inflight{Workers: workers, Reading: map[int]int{}, Busy: map[int]int{}, Draining: map[int]bool{}}
}

// Read marks the worker as about to read its leases. (With the cdc source, the retry path
// reads as worker 0 while worker 0 may be reading too: the marks are counted.)
func (g *Inflight) Read(worker int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.Reading[worker]++
}

// Hold drops the draining partitions from the worker's leases, marks the others busy until end,
// and ends the worker's reading.
func (g *Inflight) Hold(worker int, leases []Lease) []Lease {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.Reading[worker]--; g.Reading[worker] <= 0 {
		delete(g.Reading, worker)
	}
	kept := leases[:0]
	for _, l := range leases {
		if !g.Draining[l.Partition] {
			g.Busy[l.Partition]++
			kept = append(kept, l)
		}
	}
	return kept
}

// End marks the partitions of a finished batch idle.
func (g *Inflight) End(leases []Lease) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range leases {
		if g.Busy[l.Partition]--; g.Busy[l.Partition] <= 0 {
			delete(g.Busy, l.Partition)
		}
	}
}

// Rebalance takes the partitions above the relay's share and returns those with no batch in
// flight and no worker reading, to be released now. All of them become the draining set
// (replacing the previous one); the ones returned stop draining once released says so.
// rebalance(nil) clears the draining set.
func (g *Inflight) Rebalance(surplus []int) (releaseNow []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.Draining)
	for _, p := range surplus {
		g.Draining[p] = true
		if g.Busy[p] == 0 && g.Reading[p%g.Workers] == 0 {
			releaseNow = append(releaseNow, p)
		}
	}
	return releaseNow
}

// Released ends the draining of partitions whose release has committed (or failed: then they
// are owned and claimable again until the next rebalancing).
func (g *Inflight) Released(partitions []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range partitions {
		// A worker reading its leases now may have read them before the release committed:
		// keep the partition draining for it; the next rebalance clears the mark.
		if g.Reading[p%g.Workers] == 0 {
			delete(g.Draining, p)
		}
	}
}

// HasDraining says whether partitions above the share wait for their release.
func (g *Inflight) HasDraining() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.Draining) > 0
}
