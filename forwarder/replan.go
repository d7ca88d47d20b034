package forwarder

import (
	"sync"
	"time"
)

// replanner decides when the statements a relay sends for every batch (the claims, the cdc
// admit and mark for retry, the one-statement acknowledgement) are planned again. A driver that
// prepares each statement's text once per connection (pgx) has PostgreSQL keep one generic plan
// per connection and statement. Made while the outbox table fits in a few pages, that plan reads
// the whole table, and PostgreSQL keeps it until the table's statistics change (autovacuum's
// analyze, about a minute after a backlog starts with the default settings, never with
// autovacuum off). When the batches show a backlog, the statements move to a new generation
// (sqlstore.Query.InGeneration), which is prepared, and planned, on the table as it is then;
// while the backlog lasts and the table may still grow, again after 1 s, 2 s, 4 s and so on, up
// to once a minute. A relay that keeps up sends batches of a few rows and never moves.
//
// The zero value is ready to use, with the time read from time.Now.
type replanner struct {
	now func() time.Time // nil: time.Now

	mu         sync.Mutex
	generation int
	lastLarge  time.Time     // the last batch of largeBatch rows or more
	lastPlans  time.Time     // when generation began
	interval   time.Duration // from lastPlans to the next generation, while batches stay large
}

const (
	// largeBatch is the number of rows from which a batch shows a backlog: a relay that keeps
	// up claims or streams a few rows at a time.
	largeBatch = 100
	// backlogQuiet is how long after the last large batch the next one starts a new backlog.
	backlogQuiet = 10 * time.Second
	// firstReplan and lastReplan bound the interval between generations during a backlog.
	firstReplan = time.Second
	lastReplan  = time.Minute
)

// current returns the generation of the statements of a batch whose size is not known yet (a
// claim's).
func (r *replanner) current() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.generation
}

// observe notes a batch of rows and returns the generation of its statements.
func (r *replanner) observe(rows int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rows < largeBatch {
		return r.generation
	}
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	switch {
	case r.lastLarge.IsZero() || now.Sub(r.lastLarge) >= backlogQuiet: // a backlog starts
		r.generation++
		r.lastPlans, r.interval = now, firstReplan
	case now.Sub(r.lastPlans) >= r.interval:
		r.generation++
		r.lastPlans, r.interval = now, min(2*r.interval, lastReplan)
	}
	r.lastLarge = now
	return r.generation
}
