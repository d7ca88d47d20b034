package relay

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// Replanner decides when the statements a relay sends on the outbox table for every batch (the
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
type Replanner struct {
	// minRows and minBytes make a batch large: that many rows (0: largeBatch), or that many
	// payload bytes (0: no byte rule), for batches that reach their byte bound first.
	MinRows  int
	MinBytes int64
	Now      func() time.Time // nil: time.Now

	mu         sync.Mutex
	Tag        string // this replanner's, in its generations' texts: no other relay shares them
	Generation int
	LastLarge  time.Time     // the last large batch
	Start      time.Time     // when generation began
	Interval   time.Duration // from start to the next generation; 0: none until the next backlog
}

const (
	// largeBatch is the number of rows from which a batch shows a backlog: a relay that keeps
	// up claims or streams a few rows at a time.
	LargeBatch = 100
	// backlogQuiet is how long after the last large batch the next one starts a new backlog.
	BacklogQuiet = 10 * time.Second
	// firstReplan is the interval to the second generation of a backlog; it doubles after each,
	// and the generations stop once it passes lastReplan.
	FirstReplan = time.Second
	LastReplan  = 30 * time.Second
)

// Current returns the plan generation of the statements: "" for the first, else a label unique
// to this replanner and generation.
func (r *Replanner) Current() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Label()
}

func (r *Replanner) Label() string {
	if r.Generation == 0 {
		return ""
	}
	return r.Tag + "." + strconv.Itoa(r.Generation)
}

// Observe notes a batch of rows holding bytes of payload and returns the plan generation of its
// statements.
func (r *Replanner) Observe(rows int, bytes int64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	minRows := r.MinRows
	if minRows <= 0 {
		minRows = LargeBatch
	}
	if rows < minRows && (r.MinBytes <= 0 || bytes < r.MinBytes) {
		return r.Label()
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	switch {
	case r.LastLarge.IsZero() || now.Sub(r.LastLarge) >= BacklogQuiet: // a backlog starts
		r.Next(now, FirstReplan)
	case r.Interval > 0 && now.Sub(r.Start) >= r.Interval:
		r.Next(now, 2*r.Interval)
	}
	r.LastLarge = now
	return r.Label()
}

// Next starts a new generation at now, the one after it due interval later (none past lastReplan).
func (r *Replanner) Next(now time.Time, interval time.Duration) {
	if r.Tag == "" {
		r.Tag = strconv.FormatUint(rand.Uint64(), 36)
	}
	r.Generation++
	r.Start, r.Interval = now, interval
	if interval > LastReplan {
		r.Interval = 0
	}
}

// BatchBytes is the payload bytes of records.
func BatchBytes(records []Record) int64 {
	var n int64
	for _, r := range records {
		n += int64(len(r.Event.Payload))
	}
	return n
}
