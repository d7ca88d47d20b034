package forwarder

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// replanner decides when the statements a relay sends on the outbox table for every batch (the
// claims, the cdc admit and mark for retry, the acknowledgements, a failure's record) are planned
// again. A driver that prepares each statement's text once per connection (pgx, in its default
// mode) has PostgreSQL keep one generic plan per connection and statement. Made while the outbox
// table fits in a few pages, that plan reads the whole table, and PostgreSQL keeps it until the
// table's statistics change (autovacuum's analyze, about a minute after a backlog starts with
// the default settings, never with autovacuum off). When a batch shows a backlog, the statements
// move to a new generation (sqlstore.Query.InGeneration), a text of their own that is prepared,
// and planned, on the table as it is then; while the table may still be growing, again after 1,
// 2, 4, 8 and 16 s, then no more until the next backlog. A relay whose batches stay small never
// moves.
type replanner struct {
	// minRows and minBytes make a batch large: that many rows (0: largeBatch), or that many
	// payload bytes (0: no byte rule), for batches that reach their byte bound first.
	minRows  int
	minBytes int64
	now      func() time.Time // nil: time.Now

	mu         sync.Mutex
	tag        string // this replanner's, in its generations' texts: no other relay shares them
	generation int
	lastLarge  time.Time     // the last large batch
	start      time.Time     // when generation began
	interval   time.Duration // from start to the next generation; 0: none until the next backlog
}

const (
	// largeBatch is the number of rows from which a batch shows a backlog: a relay that keeps
	// up claims or streams a few rows at a time.
	largeBatch = 100
	// backlogQuiet is how long after the last large batch the next one starts a new backlog.
	backlogQuiet = 10 * time.Second
	// firstReplan is the interval to the second generation of a backlog; it doubles after each,
	// and the generations stop once it passes lastReplan.
	firstReplan = time.Second
	lastReplan  = 30 * time.Second
)

// current returns the plan generation of the statements: "" for the first, else a label unique
// to this replanner and generation.
func (r *replanner) current() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.label()
}

func (r *replanner) label() string {
	if r.generation == 0 {
		return ""
	}
	return r.tag + "." + strconv.Itoa(r.generation)
}

// observe notes a batch of rows holding bytes of payload and returns the plan generation of its
// statements.
func (r *replanner) observe(rows int, bytes int64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	minRows := r.minRows
	if minRows <= 0 {
		minRows = largeBatch
	}
	if rows < minRows && (r.minBytes <= 0 || bytes < r.minBytes) {
		return r.label()
	}
	now := time.Now()
	if r.now != nil {
		now = r.now()
	}
	switch {
	case r.lastLarge.IsZero() || now.Sub(r.lastLarge) >= backlogQuiet: // a backlog starts
		r.next(now, firstReplan)
	case r.interval > 0 && now.Sub(r.start) >= r.interval:
		r.next(now, 2*r.interval)
	}
	r.lastLarge = now
	return r.label()
}

// next starts a new generation at now, the one after it due interval later (none past lastReplan).
func (r *replanner) next(now time.Time, interval time.Duration) {
	if r.tag == "" {
		r.tag = strconv.FormatUint(rand.Uint64(), 36)
	}
	r.generation++
	r.start, r.interval = now, interval
	if interval > lastReplan {
		r.interval = 0
	}
}

// batchBytes is the payload bytes of records.
func batchBytes(records []record) int64 {
	var n int64
	for _, r := range records {
		n += int64(len(r.event.Payload))
	}
	return n
}
