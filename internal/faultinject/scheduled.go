package faultinject

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// The scheduled variant (Config.Scheduled): a share of the transactions also write an event
// scheduled a few seconds ahead by the database's clock, on one of their keys, carrying its
// deliver_at in the payload; some transactions cancel a scheduled event, either their own (it is
// still scheduled: the cancel must report it Changed) or one committed earlier by any writer,
// which races the relays' release. The checker then holds docs/scheduled.md's rules: no copy of a
// scheduled event reaches the broker before its deliver_at (the Kafka record's timestamp, the
// relay's clock when it produced it, is a lower bound of the arrival, never a lateness bound); a
// cancel that committed with Changed withdrew its event for good; one reporting Released or
// NotFound left it to arrive (NotFound: it was published before the cancel returned); every
// other event arrives; and the unscheduled events keep their key's order.

// Delays of a scheduled event beyond the database's clock at its write.
const (
	minScheduleAhead = 2 * time.Second
	maxScheduleAhead = 5 * time.Second
)

// Shares of the scheduled variant's transactions that cancel.
const (
	// ownCancelShare of the transactions that write a scheduled event cancel it before they commit.
	ownCancelShare = 1.0 / 6
	// laterCancelShare of all the transactions cancel a scheduled event committed earlier.
	laterCancelShare = 0.1
)

// validateScheduled checks the scheduled variant's settings.
func (c Config) validateScheduled() error {
	switch {
	case c.Scheduled == 0 && c.DueGrid != 0:
		return fmt.Errorf("faultinject: DueGrid %s without Scheduled: the grid is the scheduled variant's", c.DueGrid)
	case c.Scheduled == 0:
		return nil
	case c.Scheduled < 0 || c.Scheduled > 1:
		return fmt.Errorf("faultinject: Scheduled %v: want a share between 0 and 1", c.Scheduled)
	case c.Broker.Kind != Kafka && c.Broker.Kind != KafkaCluster:
		return fmt.Errorf("faultinject: Scheduled with broker %s: the check reads Kafka's record timestamps", c.Broker.Kind)
	case c.source() != "polling" && c.source() != "cdc":
		return fmt.Errorf("faultinject: Scheduled with source %s: the variant runs the polling and cdc sources (the wal source keeps no scheduled event)", c.source())
	case c.SQLWriters:
		return fmt.Errorf("faultinject: Scheduled with SQLWriters: the variant cancels through outbox.Writer")
	case c.Schema != "":
		return fmt.Errorf("faultinject: Scheduled with Schema %q: the Avro schema has no deliver_at field", c.Schema)
	case c.DueGrid < 0 || (c.DueGrid > 0 && c.DueGrid < 100*time.Millisecond):
		return fmt.Errorf("faultinject: DueGrid %s: want 0 or at least 100ms", c.DueGrid)
	}
	return nil
}

// scheduleLedger is the scheduled variant's record of what was written and cancelled.
type scheduleLedger struct {
	mu sync.Mutex
	// deliverAt is the delivery time of every scheduled event written, committed or not.
	deliverAt map[string]time.Time
	// pool holds committed scheduled events no later cancel has taken yet, by installation.
	pool map[int][]string
	// cancelled are the events whose cancel committed with Changed: they must never arrive.
	cancelled map[string]bool
	// notFoundAt is when a committed cancel that reported the event NotFound returned: the
	// event was published before then.
	notFoundAt map[string]time.Time
	// contested are the events a later cancel locked in a transaction that did not commit:
	// the release skips such a row while the cancel holds it, so it may go out after a later
	// event of its key due at the same time (docs/scheduled.md, the ordering rule's exception).
	contested                                                   map[string]bool
	scheduled                                                   int // committed scheduled events
	ownChanged, laterChanged, released, notFound, ownNotChanged int
}

func newScheduleLedger() *scheduleLedger {
	return &scheduleLedger{deliverAt: map[string]time.Time{}, pool: map[int][]string{},
		cancelled: map[string]bool{}, notFoundAt: map[string]time.Time{}, contested: map[string]bool{}}
}

// schedTx is what one transaction of the scheduled variant does about scheduled events.
type schedTx struct {
	schedule  bool   // one of its events is scheduled
	cancelOwn bool   // and cancelled before the commit
	ownID     string // that event
	later     string // a scheduled event committed earlier that it cancels ("": none)
	ownRes    outbox.ScheduleResult
	laterRes  outbox.ScheduleResult
	cancelled time.Time // when the later cancel returned
}

// planSchedule decides what the transaction does; nil outside the scheduled variant.
func (e *env) planSchedule(in *installation, rng *mrand.Rand, poison bool) *schedTx {
	if e.sched == nil || poison {
		return nil
	}
	st := &schedTx{schedule: rng.Float64() < e.cfg.Scheduled}
	st.cancelOwn = st.schedule && rng.Float64() < ownCancelShare
	if rng.Float64() < laterCancelShare {
		st.later = e.sched.take(in.index, rng)
	}
	return st
}

// take removes and returns a committed scheduled event of installation inst from the pool (""
// when there is none): half the time the oldest, which is the likeliest to be coming due as the
// cancel runs, otherwise a random one.
func (l *scheduleLedger) take(inst int, rng *mrand.Rand) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pool[inst]
	if len(p) == 0 {
		return ""
	}
	i := 0
	if rng.IntN(2) == 0 {
		i = rng.IntN(len(p))
	}
	id := p[i]
	l.pool[inst] = slices.Delete(p, i, i+1)
	return id
}

// scheduleEvent makes ev, the transaction's last event, a scheduled one: due between
// minScheduleAhead and maxScheduleAhead after the database's clock now, its deliver_at (to the
// microsecond the database keeps) also in its payload.
func (e *env) scheduleEvent(ctx context.Context, tx *sql.Tx, rng *mrand.Rand, ev *outbox.Event) error {
	var p payload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return fmt.Errorf("faultinject: payload of %s: %w", ev.ID, err)
	}
	now, err := e.dbNow(ctx, tx)
	if err != nil {
		return fmt.Errorf("read the database clock: %w", err)
	}
	ahead := minScheduleAhead + time.Duration(rng.Int64N(int64(maxScheduleAhead-minScheduleAhead)))
	ev.DeliverAt = now.Add(ahead).Truncate(time.Microsecond).UTC()
	if g := e.cfg.DueGrid; g > 0 {
		if t := ev.DeliverAt.Truncate(g); !t.Equal(ev.DeliverAt) {
			ev.DeliverAt = t.Add(g)
		}
	}
	p.DeliverAt = ev.DeliverAt.Format(time.RFC3339Nano)
	body, err := outbox.NewJSONEvent(ev.Topic, ev.AggregateType, ev.AggregateID, ev.EventType, p)
	if err != nil {
		return err
	}
	ev.Payload = body.Payload
	e.sched.mu.Lock()
	e.sched.deliverAt[ev.ID.String()] = ev.DeliverAt
	e.sched.mu.Unlock()
	return nil
}

// dbNow reads the database's clock, the one the relays' release compares deliver_at with.
func (e *env) dbNow(ctx context.Context, tx *sql.Tx) (time.Time, error) {
	var now time.Time
	query := "SELECT clock_timestamp()"
	if e.cfg.Dialect == outbox.MySQL {
		query = "SELECT UTC_TIMESTAMP(6)" // deliver_at is UTC on MariaDB/MySQL
	}
	err := tx.QueryRowContext(ctx, query).Scan(&now)
	return now, err
}

// cancel runs the transaction's cancels in tx, before its commit.
func (st *schedTx) cancel(ctx context.Context, tx *sql.Tx, w eventWriter) error {
	if st == nil || (!st.cancelOwn && st.later == "") {
		return nil
	}
	ow, ok := w.(*outbox.Writer)
	if !ok {
		return fmt.Errorf("faultinject: the scheduled variant cancels through *outbox.Writer, not %T", w)
	}
	var err error
	if st.cancelOwn {
		if st.ownRes, err = ow.Cancel(ctx, wsql.TxFromStdSQL(tx), uuid.MustParse(st.ownID)); err != nil {
			return err
		}
	}
	if st.later != "" {
		if st.laterRes, err = ow.Cancel(ctx, wsql.TxFromStdSQL(tx), uuid.MustParse(st.later)); err != nil {
			return err
		}
		st.cancelled = time.Now()
	}
	return nil
}

// settle files the transaction's scheduled events and cancels once its outcome is known
// (committed: ok; unknown: err is a commit error). An event cancelled by a transaction that did
// not commit stays expected; one whose cancel's commit is unknown becomes uncertain.
func (e *env) settle(st *schedTx, inst int, ok bool, err error) {
	if st == nil {
		return
	}
	l := e.sched
	e.outMu.Lock()
	defer e.outMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	committed := ok && err == nil
	if !committed {
		if st.later != "" && err == nil {
			l.pool[inst] = append(l.pool[inst], st.later) // rolled back: still scheduled
		}
		for _, id := range changedIDs(st.laterRes) {
			l.contested[id] = true
		}
		if err != nil { // the commit's outcome is unknown
			for _, id := range append(changedIDs(st.laterRes), changedIDs(st.ownRes)...) {
				delete(e.out.committed, id)
				e.out.uncertain[id] = true
			}
		}
		return
	}
	if st.schedule {
		l.scheduled++
	}
	if st.cancelOwn {
		if len(st.ownRes.Changed) == 1 {
			l.ownChanged++
		} else {
			l.ownNotChanged++ // its own uncommitted event must still be scheduled
		}
	} else if st.schedule {
		l.pool[inst] = append(l.pool[inst], st.ownID)
	}
	for _, id := range changedIDs(st.ownRes) {
		delete(e.out.committed, id)
		l.cancelled[id] = true
	}
	if st.later == "" {
		return
	}
	l.released += len(st.laterRes.Released)
	l.notFound += len(st.laterRes.NotFound)
	for _, id := range st.laterRes.NotFound {
		l.notFoundAt[id.String()] = st.cancelled
	}
	for _, id := range changedIDs(st.laterRes) {
		l.laterChanged++
		delete(e.out.committed, id)
		l.cancelled[id] = true
	}
}

func changedIDs(r outbox.ScheduleResult) []string {
	ids := make([]string, len(r.Changed))
	for i, id := range r.Changed {
		ids[i] = id.String()
	}
	return ids
}

// scheduledLeft counts the rows still scheduled (status 4) in every installation's table.
func (e *env) scheduledLeft(ctx context.Context) (int, error) {
	total := 0
	for _, in := range e.insts {
		var n int
		if err := in.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+in.table.Events()+" WHERE status = 4").Scan(&n); err != nil {
			return 0, fmt.Errorf("faultinject: count scheduled rows of installation %d: %w", in.index, err)
		}
		total += n
	}
	return total, nil
}

// noneScheduled is part of drained in the scheduled variant: every scheduled row was cancelled
// or released, so every event that is to arrive can arrive.
func (e *env) noneScheduled(ctx context.Context) bool {
	if e.sched == nil {
		return true
	}
	n, err := e.scheduledLeft(ctx)
	return err == nil && n == 0
}

// checkScheduled fills the scheduled variant's checks of res from every delivery: copies of a
// scheduled event produced before its deliver_at, cancelled events that arrived, events reported
// NotFound by a cancel but produced after it returned, and the rows left scheduled.
func (e *env) checkScheduled(ctx context.Context, res *Result) error {
	l := e.sched
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	res.Scheduled, res.CancelledOwn, res.CancelledLater = l.scheduled, l.ownChanged, l.laterChanged
	res.CancelReleased, res.CancelNotFound, res.OwnCancelMissed = l.released, l.notFound, l.ownNotChanged
	first := map[string]time.Time{} // the earliest production of each scheduled event
	for _, d := range e.rec.deliveries {
		at, ok := l.deliverAt[d.id]
		if !ok || d.bad != "" {
			continue
		}
		if d.ts.Before(at.Truncate(time.Millisecond)) { // Kafka's timestamps are milliseconds
			res.Early++
			e.sample(res, "scheduled %s produced at %s, before its deliver_at %s (%s)", d.id,
				d.ts.UTC().Format("15:04:05.000"), at.UTC().Format("15:04:05.000000"), d.where)
		}
		if f, seen := first[d.id]; !seen || d.ts.Before(f) {
			first[d.id] = d.ts
		}
	}
	for id, ts := range first {
		if l.cancelled[id] {
			res.CancelledArrived++
			e.sample(res, "cancelled %s arrived (produced at %s)", id, ts.UTC().Format("15:04:05.000"))
		}
		// NotFound means no row was left to publish: the event had been published before.
		if t, ok := l.notFoundAt[id]; ok && ts.After(t) {
			res.NotFoundLate++
			e.sample(res, "%s, reported NotFound by a cancel at %s, was first produced at %s", id,
				t.UTC().Format("15:04:05.000"), ts.UTC().Format("15:04:05.000"))
		}
	}
	e.checkDueTogether(res)
	n, err := e.scheduledLeft(ctx)
	res.ScheduledLeft = n
	return err
}

// checkDueTogether holds the rule "events of one key that come due together go out in sequence
// order" (docs/scheduled.md): among the scheduled events of one key with the same deliver_at, the
// first copies arrive in the order of the key's sequence numbers (commit order). Events a
// cancel held in a transaction that did not commit are left out: the release skips a row while
// a cancel holds it, the documented exception. Called with l.mu held.
func (e *env) checkDueTogether(res *Result) {
	l := e.sched
	type group struct {
		key string
		at  time.Time
	}
	seen := map[string]bool{}
	last := map[group]delivery{}
	size := map[group]int{}
	for _, d := range e.rec.deliveries {
		at, ok := l.deliverAt[d.id]
		if !ok || d.bad != "" || seen[d.id] || l.contested[d.id] || l.cancelled[d.id] {
			continue
		}
		seen[d.id] = true
		g := group{d.key, at}
		size[g]++
		if prev, ok := last[g]; ok && d.seq < prev.seq {
			res.DueOrderViolations++
			e.sample(res, "key %s, due together at %s: seq %d (%s) arrived after seq %d (%s)", d.key,
				at.UTC().Format("15:04:05.000000"), d.seq, d.where, prev.seq, prev.where)
			continue
		}
		last[g] = d
	}
	for _, n := range size {
		if n > 1 {
			res.DueTogether += n
		}
	}
}

// dueInstant returns the next instant, at least lead from now, at which a written scheduled
// event comes due (a multiple of Config.DueGrid), or the next multiple if none is known yet.
func (l *scheduleLedger) dueInstant(grid, lead time.Duration) time.Time {
	from := time.Now().Add(lead)
	next := from.Truncate(grid).Add(grid)
	l.mu.Lock()
	defer l.mu.Unlock()
	var best time.Time
	for _, at := range l.deliverAt {
		if at.After(from) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	if best.IsZero() {
		return next
	}
	return best
}

// awaitDueMoment sleeps until a moment around an instant at which scheduled events come due:
// between DueGrid/10 before and DueGrid/5 after it, drawn by rng, and returns the instant and
// the offset. The local clock stands in for the database's: the test services run on this
// machine. Nothing the checker verifies depends on where in that window the kill lands.
func (e *env) awaitDueMoment(ctx context.Context, rng *mrand.Rand) (time.Time, time.Duration) {
	g := e.cfg.DueGrid
	before, after := g/10, g/5
	offset := time.Duration(rng.Int64N(int64(before+after))) - before
	due := e.sched.dueInstant(g, before+10*time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(due.Add(offset))):
	}
	return due, offset
}

// isCancelled reports whether a committed cancel withdrew event id.
func (l *scheduleLedger) isCancelled(id string) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cancelled[id]
}
