package forwarder

import "sync"

// inflight keeps a relay from fencing itself: when rebalancing gives partitions up, a partition
// with a batch of this relay in flight is not released at once (its acknowledgement would be
// refused and the new owner would publish the batch again). It is marked draining instead:
// workers claim no new rows of it, and a later heartbeat releases it once the batch is done.
//
// A worker announces itself (reading) before it reads its leases and holds the partitions it
// claims from (hold) until the batch is acknowledged (end); while a worker is reading, all of
// its share counts as busy. The partitions about to be released are draining too until the
// release has committed (released), so a worker that read its leases just before the release
// never claims from them.
type inflight struct {
	mu       sync.Mutex
	workers  int
	reading  map[int]int // worker -> how many of its loops are between reading their leases and hold
	busy     map[int]int // partition -> batches in flight
	draining map[int]bool
}

func newInflight(workers int) *inflight {
	return &inflight{workers: workers, reading: map[int]int{}, busy: map[int]int{}, draining: map[int]bool{}}
}

// read marks the worker as about to read its leases. (With the cdc source, the retry path
// reads as worker 0 while worker 0 may be reading too: the marks are counted.)
func (g *inflight) read(worker int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reading[worker]++
}

// hold drops the draining partitions from the worker's leases, marks the others busy until end,
// and ends the worker's reading.
func (g *inflight) hold(worker int, leases []lease) []lease {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reading[worker]--; g.reading[worker] <= 0 {
		delete(g.reading, worker)
	}
	kept := leases[:0]
	for _, l := range leases {
		if !g.draining[l.partition] {
			g.busy[l.partition]++
			kept = append(kept, l)
		}
	}
	return kept
}

// end marks the partitions of a finished batch idle.
func (g *inflight) end(leases []lease) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range leases {
		if g.busy[l.partition]--; g.busy[l.partition] <= 0 {
			delete(g.busy, l.partition)
		}
	}
}

// rebalance takes the partitions above the relay's share and returns those with no batch in
// flight and no worker reading, to be released now. All of them become the draining set
// (replacing the previous one); the ones returned stop draining once released says so.
// rebalance(nil) clears the draining set.
func (g *inflight) rebalance(surplus []int) (releaseNow []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.draining)
	for _, p := range surplus {
		g.draining[p] = true
		if g.busy[p] == 0 && g.reading[p%g.workers] == 0 {
			releaseNow = append(releaseNow, p)
		}
	}
	return releaseNow
}

// released ends the draining of partitions whose release has committed (or failed: then they
// are owned and claimable again until the next rebalancing).
func (g *inflight) released(partitions []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range partitions {
		// A worker reading its leases now may have read them before the release committed:
		// keep the partition draining for it; the next rebalance clears the mark.
		if g.reading[p%g.workers] == 0 {
			delete(g.draining, p)
		}
	}
}

// hasDraining says whether partitions above the share wait for their release.
func (g *inflight) hasDraining() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.draining) > 0
}
