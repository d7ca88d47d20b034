package faultinject

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// Faults aimed at the wal source's shape: one relay streams the slot and holds every lease,
// so the kills that matter hit that one; parked keys are released by an operator while the
// writers go on.

// killStreamer SIGKILLs the relay of installation target that owns the most partitions: the
// streaming relay, which holds every lease (waiting up to 30 s for one to hold them after a
// takeover on a loaded machine); without one, a random running relay.
func (in *injector) killStreamer(ctx context.Context, target *installation, f fault) {
	e := in.e
	for range 300 {
		owners, err := e.leaseOwners(ctx, target)
		if err != nil {
			in.fail(err)
			return
		}
		slot, most := -1, 0
		for _, i := range target.rl.running() {
			id, _ := target.rl.relayID(i)
			if n := len(owned(owners, id)); n > most {
				slot, most = i, n
			}
		}
		if slot >= 0 && target.rl.killSlot(slot) {
			in.mu.Lock()
			in.res.StreamerKills++
			in.mu.Unlock()
			e.logf("SIGKILLed the streaming relay (slot %d, %d partitions) at %.0f%%", slot, most, 100*f.at)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if target.rl.kill() {
		e.logf("no relay holds the leases: SIGKILLed a random relay at %.0f%%", 100*f.at)
	}
}

// killSlot SIGKILLs slot i's relay if it runs and is neither killed nor paused.
func (r *relays) killSlot(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[i]
	if p == nil || r.killed[i] || r.paused[i] {
		return false
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return false
	}
	r.killed[i] = true
	r.kills++
	return true
}

// discardUnderLoad (Config.DiscardAt) waits until the poison events due by then (those the
// writers place before DiscardAt) and every other one committed so far are dead (at most
// DrainTimeout; the writers go on meanwhile, so the due ones are written), notes how many keys are parked, dead and held behind them, then
// discards the dead ones as an operator does, and releases the writers that kept writing past
// Config.Events meanwhile: the released keys drain while new events of theirs are written.
func (in *injector) discardUnderLoad(ctx context.Context, f fault) {
	e := in.e
	defer e.holdWriters.Store(false)
	deadline := time.Now().Add(e.cfg.DrainTimeout)
	due := min(e.cfg.PoisonEvents, int(float64(e.cfg.PoisonEvents+1)*e.cfg.DiscardAt)) // claimPoison's spread
	for {
		ids := e.poisonIDs()
		dead := 0
		for _, id := range ids {
			r, err := e.poisonRowOf(ctx, id)
			if err != nil {
				in.fail(err)
				return
			}
			if r.found && r.status == statusDead {
				dead++
			}
		}
		if (dead >= max(due, 1) && dead == len(ids)) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	parked, dead, err := e.parkedKeys(ctx)
	if err != nil {
		in.fail(err)
		return
	}
	before := len(e.discarded)
	held, err := e.discardPoison(ctx)
	if err != nil {
		in.fail(err)
		return
	}
	in.mu.Lock()
	in.res.DiscardedUnderLoad = len(e.discarded) - before
	in.res.ParkedKeysAtDiscard, in.res.DeadKeysAtDiscard, in.res.HeldAtDiscard = parked, dead, held
	in.mu.Unlock()
	e.logf("discarded %d dead poison events under load at %.0f%% (%d committed): %d keys parked, %d of them dead, %d events held behind them",
		len(e.discarded)-before, 100*f.at, e.committedCount.Load(), parked, dead, held)
}

// parkedKeys counts the keys with rows in the outbox tables (pending or dead: parked, with the
// wal source), and those with a dead row.
func (e *env) parkedKeys(ctx context.Context) (parked, dead int, err error) {
	for _, in := range e.insts {
		var p, d int
		if err := in.db.QueryRowContext(ctx, "SELECT count(DISTINCT aggregate_id), count(DISTINCT CASE WHEN status = 2 THEN aggregate_id END) FROM "+
			in.table.Events()+" WHERE status IN (0, 2)").Scan(&p, &d); err != nil {
			return 0, 0, fmt.Errorf("faultinject: parked keys of installation %d: %w", in.index, err)
		}
		parked, dead = parked+p, dead+d
	}
	return parked, dead, nil
}
