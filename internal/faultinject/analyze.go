package faultinject

import (
	"context"
	"fmt"
)

// analyze fills the checks of res from the deliveries and the database: the ledger of the
// events (delivered, lost, phantoms, order, duplicates), the rows left in every installation's
// table, the poison events, and the effects.
func (e *env) analyze(ctx context.Context, res *Result) error {
	out := e.out
	res.Committed, res.RolledBack, res.Uncertain = len(out.committed), len(out.rolledBack), len(out.uncertain)
	res.Messages = len(e.rec.deliveries)
	e.countDecoded(res)
	seen := e.checkDeliveries(res)
	e.countLost(res, seen)
	if err := e.checkScheduled(ctx, res); err != nil {
		return err
	}
	if err := e.countRows(ctx, res); err != nil {
		return err
	}
	if err := e.checkPoison(ctx, res, seen); err != nil {
		return err
	}
	return e.checkEffects(ctx, res)
}

// checkDeliveries counts the deliveries that could not be decoded, the duplicates, the events
// delivered, the poison events published, the phantoms (events never committed) and the per-key
// order violations, and returns the event ids delivered.
func (e *env) checkDeliveries(res *Result) map[string]bool {
	out := e.out
	seen := map[string]bool{}
	phantom := map[string]bool{}
	last := map[string]int64{}
	lastAt := map[string]delivery{}
	for _, d := range e.rec.deliveries {
		if d.bad != "" {
			res.Undecodable++
			e.sample(res, "message %q: %s", d.id, d.bad)
			continue
		}
		if seen[d.id] {
			res.Duplicates++
			continue
		}
		seen[d.id] = true
		switch {
		case out.committed[d.id]:
			res.Delivered++
		case out.poison[d.id]:
			res.PoisonPublished++ // the broker took it after all: published, checked for order
		case out.uncertain[d.id]:
			// The commit's outcome is unknown: it may legitimately have committed.
		case e.sched.isCancelled(d.id):
			continue // counted by checkScheduled
		default:
			if !phantom[d.id] {
				phantom[d.id] = true
				res.Phantoms++
				e.sample(res, "phantom %s (key %s seq %d, rolled back: %v)", d.id, d.key, d.seq, out.rolledBack[d.id])
			}
			continue
		}
		if d.scheduled {
			continue // a scheduled event leaves its key's order (docs/scheduled.md)
		}
		if d.seq <= last[d.key] {
			res.OrderViolations++
			prev := lastAt[d.key]
			e.sample(res, "key %s: seq %d (%s, %s) arrived after seq %d (%s, %s)", d.key, d.seq, d.where,
				d.at.Format("15:04:05.000"), last[d.key], prev.where, prev.at.Format("15:04:05.000"))
		}
		if d.seq > last[d.key] {
			last[d.key], lastAt[d.key] = d.seq, d
		}
	}
	return seen
}

// countLost counts the committed events never delivered, per installation when there are several.
func (e *env) countLost(res *Result, seen map[string]bool) {
	if len(e.insts) > 1 {
		res.LostBy = make([]int, len(e.insts))
	}
	for id := range e.out.committed {
		if !seen[id] {
			res.Lost++
			if res.LostBy != nil {
				res.LostBy[e.out.installation[id]]++
			}
			e.sample(res, "lost %s (installation %d)", id, e.out.installation[id])
		}
	}
}

// checkEffects reads the consumers' effects and counts the committed events without exactly one,
// and the effects of events never committed.
func (e *env) checkEffects(ctx context.Context, res *Result) error {
	rows, err := e.db.QueryContext(ctx, "SELECT event_id, COUNT(*) FROM "+e.effectsTable+" GROUP BY event_id")
	if err != nil {
		return fmt.Errorf("faultinject: read effects: %w", err)
	}
	defer rows.Close()
	effectsOf := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return fmt.Errorf("faultinject: read effects: %w", err)
		}
		effectsOf[id] = n
		res.Effects += n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("faultinject: read effects: %w", err)
	}
	for id := range e.out.committed {
		if effectsOf[id] != 1 {
			res.EffectViolations++
			e.sample(res, "event %s has %d effects", id, effectsOf[id])
		}
	}
	for id, n := range effectsOf {
		if !e.out.committed[id] && !e.out.uncertain[id] {
			res.EffectViolations++
			e.sample(res, "effect for uncommitted event %s (%d)", id, n)
		}
	}
	return nil
}

// countRows counts the rows left dead and pending in every installation's outbox table.
func (e *env) countRows(ctx context.Context, res *Result) error {
	for _, in := range e.insts {
		var dead, pending int
		if err := in.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), 0), "+
			"COALESCE(SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), 0) FROM "+in.table.Events()).
			Scan(&dead, &pending); err != nil {
			return fmt.Errorf("faultinject: count outbox rows of installation %d: %w", in.index, err)
		}
		res.DeadLettered += dead
		res.Pending += pending
	}
	return nil
}
