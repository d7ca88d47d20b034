package forwarder

import "sync"

// inflight keeps a relay from fencing itself: when rebalancing gives partitions up, a partition
// with a batch of this relay in flight is not released at once (its acknowledgement would be
// refused and the new owner would publish the batch again). It is marked draining instead:
// workers claim no new rows of it, and a later heartbeat releases it once the batch is done.
type inflight struct {
	mu       sync.Mutex
	busy     map[int]int
	draining map[int]bool
}

func newInflight() *inflight {
	return &inflight{busy: map[int]int{}, draining: map[int]bool{}}
}

// begin drops the draining partitions from leases and marks the others busy until end.
func (g *inflight) begin(leases []lease) []lease {
	g.mu.Lock()
	defer g.mu.Unlock()
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
// flight, to be released now; the others become the draining set (replacing the previous one),
// released by a later heartbeat. rebalance(nil) clears the draining set.
func (g *inflight) rebalance(surplus []int) (releaseNow []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.draining)
	for _, p := range surplus {
		if g.busy[p] == 0 {
			releaseNow = append(releaseNow, p)
		} else {
			g.draining[p] = true
		}
	}
	return releaseNow
}
