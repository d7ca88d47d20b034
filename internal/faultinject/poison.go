package faultinject

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
)

// Poison events (Config.PoisonEvents) are over the broker's message limit: the contract's
// bounded retry says each ends dead-lettered (its row dead, status 2) within max_attempts, and
// park-don't-block says only the later events of its own key wait: behind the dead letter,
// until an operator discards it (the run does, then they must arrive too).

// Row statuses of the outbox table.
const (
	statusPending = 0
	statusDead    = 2
)

// poisonRow is what the outbox table says of a poison event.
type poisonRow struct {
	found            bool
	status, attempts int
}

// poisonIDs returns the committed poison events, sorted.
func (e *env) poisonIDs() []string {
	e.outMu.Lock()
	defer e.outMu.Unlock()
	ids := make([]string, 0, len(e.out.poison))
	for id := range e.out.poison {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// poisonRowOf looks the event up in every installation's table.
func (e *env) poisonRowOf(ctx context.Context, id string) (poisonRow, error) {
	for _, in := range e.insts {
		var r poisonRow
		err := in.db.QueryRowContext(ctx, e.q("SELECT status, attempts FROM "+in.table.Events()+" WHERE event_id = ?"), id).
			Scan(&r.status, &r.attempts)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return r, fmt.Errorf("faultinject: poison event %s: %w", id, err)
		}
		r.found = true
		return r, nil
	}
	return poisonRow{}, nil
}

// poisonSettled reports whether every poison event committed so far was delivered or is dead,
// and in the schema variant its dead letter was read (a failed look-up counts as not settled:
// the drain goes on).
func (e *env) poisonSettled(ctx context.Context) bool {
	for _, id := range e.poisonIDs() {
		if _, gone := e.discarded[id]; gone || e.rec.missing(map[string]bool{id: true}) == 0 {
			continue
		}
		r, err := e.poisonRowOf(ctx, id)
		if err != nil || !r.found || r.status != statusDead || !e.reg.deadLetterRead(id) {
			return false
		}
	}
	return true
}

// checkPoison fills the poison counts of res; seen holds the events delivered.
func (e *env) checkPoison(ctx context.Context, res *Result, seen map[string]bool) error {
	ids := e.poisonIDs()
	res.Poison = len(ids)
	for _, id := range ids {
		if seen[id] {
			if e.reg != nil {
				res.PoisonPathMissing++
				e.sample(res, "poison %s was published although its payload breaks the schema", id)
			}
			continue // counted as published by analyze
		}
		r, discarded := e.discarded[id]
		if !discarded {
			var err error
			if r, err = e.poisonRowOf(ctx, id); err != nil {
				return err
			}
		}
		switch {
		case r.found && r.status == statusDead:
			res.PoisonDead++
			res.PoisonMaxAttempts = max(res.PoisonMaxAttempts, r.attempts)
			if e.reg != nil {
				e.checkDeadLetter(res, id)
			}
			if r.attempts > res.MaxAttempts {
				res.PoisonOverBudget++
				e.sample(res, "poison %s dead after %d attempts (max_attempts %d)", id, r.attempts, res.MaxAttempts)
			}
		case r.found && r.status == statusPending:
			res.PoisonStuck++
			res.PoisonPending++
			e.sample(res, "poison %s still pending after %d attempts", id, r.attempts)
		default:
			res.PoisonStuck++
			e.sample(res, "poison %s neither published nor dead (row found %v, status %d)", id, r.found, r.status)
		}
	}
	return nil
}

// sample keeps the first few examples of what went wrong.
func (e *env) sample(res *Result, format string, args ...any) {
	if len(res.Samples) < 5 {
		res.Samples = append(res.Samples, fmt.Sprintf(format, args...))
	}
}

// heldBehindDead returns the pending events that wait behind a dead event of their key: the
// forwarder parks the rest of a key behind its dead letter until an operator replays or
// discards it (docs/operations.md), so they are visibly pending, not lost, until then.
func (e *env) heldBehindDead(ctx context.Context) (map[string]bool, error) {
	held := map[string]bool{}
	for _, in := range e.insts {
		t := in.table.Events()
		rows, err := in.db.QueryContext(ctx, "SELECT p.event_id FROM "+t+" p WHERE p.status = 0 AND EXISTS (SELECT 1 FROM "+
			t+" d WHERE d.status = 2 AND d.aggregate_id = p.aggregate_id AND d.seq < p.seq)")
		if err != nil {
			return nil, fmt.Errorf("faultinject: events held behind dead letters: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return nil, err
			}
			held[id] = true
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return held, nil
}

// drained reports whether every committed event arrived, except those held behind a dead
// poison event, and every poison event was delivered or is dead.
func (e *env) drained(ctx context.Context) bool {
	if e.cfg.PoisonEvents == 0 {
		return e.rec.missing(e.out.committed) == 0 && e.noneScheduled(ctx)
	}
	held, err := e.heldBehindDead(ctx)
	if err != nil {
		return false
	}
	waiting := map[string]bool{}
	for id := range e.out.committed {
		if !held[id] {
			waiting[id] = true
		}
	}
	return e.rec.missing(waiting) == 0 && e.poisonSettled(ctx)
}

// discardPoison does what an operator does about a dead poison event: `outboxkit dead-letters
// discard` with each installation's relay configuration, which releases the rest of its key.
// It returns how many events were held behind them.
func (e *env) discardPoison(ctx context.Context) (int, error) {
	held, err := e.heldBehindDead(ctx)
	if err != nil {
		return 0, err
	}
	for _, in := range e.insts {
		var ids []string
		for _, id := range e.poisonIDs() {
			r, err := e.poisonRowOf(ctx, id)
			if err != nil {
				return len(held), err
			}
			if r.found && r.status == statusDead && e.installationOf(id) == in.index {
				if _, again := e.discarded[id]; again {
					e.rediscarded++
					e.logf("poison %s is dead in the table again after its discard", id)
				}
				e.discarded[id] = r // what the table said before the discard deleted the row
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			continue
		}
		args := append([]string{"dead-letters", "discard", "--config", filepath.Join(in.rl.logDir, "relay-0.yaml")}, ids...)
		cmd := exec.CommandContext(ctx, e.bin, args...)
		cmd.Env = relayEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return len(held), fmt.Errorf("faultinject: outboxkit dead-letters discard: %w: %s", err, out)
		}
		e.logf("discarded %d dead poison events of installation %d (outboxkit dead-letters discard)", len(ids), in.index)
	}
	return len(held), nil
}

// installationOf is the installation that wrote event id.
func (e *env) installationOf(id string) int {
	e.outMu.Lock()
	defer e.outMu.Unlock()
	return e.out.installation[id]
}
