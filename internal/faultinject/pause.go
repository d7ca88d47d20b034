package faultinject

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// pauseVictimWait bounds the wait for a running relay that owns partitions, the pause's victim.
const pauseVictimWait = 3 * time.Minute

// leaseGroup is the lease group of the relays (the CLI's default).
const leaseGroup = "default"

// leaseOwners returns the owner of every partition of installation in's lease group ("" for none).
func (e *env) leaseOwners(ctx context.Context, in *installation) (map[int]string, error) {
	rows, err := in.db.QueryContext(ctx, e.q("SELECT partition_no, owner FROM "+in.table.Leases()+" WHERE lease_group = ?"), leaseGroup)
	if err != nil {
		return nil, fmt.Errorf("faultinject: read leases: %w", err)
	}
	defer rows.Close()
	owners := map[int]string{}
	for rows.Next() {
		var p int
		var owner sql.NullString
		if err := rows.Scan(&p, &owner); err != nil {
			return nil, err
		}
		owners[p] = owner.String
	}
	return owners, rows.Err()
}

func owned(owners map[int]string, id string) []int {
	var parts []int
	for p := range outbox.Partitions {
		if id != "" && owners[p] == id {
			parts = append(parts, p)
		}
	}
	return parts
}

// pauseRelay SIGSTOPs a relay of installation in for length, then SIGCONTs it, and measures how long its
// partitions took to move to other relays. slot -1 picks the running relay owning the most
// partitions. For up to catchFor it first waits for a moment when the relay is inside a batch
// as far as the database can tell (one of its connections inside a statement or a
// transaction), so that the pause falls mid-batch.
func (e *env) pauseRelay(ctx context.Context, in *installation, slot int, length, catchFor time.Duration) (Pause, error) {
	// Relays killed before the pause, or stalled by a broker restart, take their partitions back
	// only after their restart and a lease period, which a loaded machine stretches: the wait is
	// a bound against a hang, not a timing the run depends on.
	for deadline := time.Now().Add(pauseVictimWait); ; {
		p, ok, err := e.tryPause(ctx, in, slot, length, catchFor)
		if err != nil || ok {
			return p, err
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("faultinject: found no running relay owning partitions to pause in %v", pauseVictimWait)
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (e *env) tryPause(ctx context.Context, in *installation, slot int, length, catchFor time.Duration) (Pause, bool, error) {
	rl := in.rl
	owners, err := e.leaseOwners(ctx, in)
	if err != nil {
		return Pause{}, false, err
	}
	victim, most := -1, 0
	for _, i := range rl.running() {
		id, _ := rl.relayID(i)
		if n := len(owned(owners, id)); (slot < 0 || slot == i) && n > most {
			victim, most = i, n
		}
	}
	if victim < 0 {
		return Pause{}, false, nil
	}
	_, pid := rl.relayID(victim)
	caught := "idle"
	for until := time.Now().Add(catchFor); time.Now().Before(until) && caught == "idle"; {
		conns, err := e.connections(ctx, []int{pid})
		if err != nil {
			return Pause{}, false, err
		}
		for _, c := range conns {
			switch {
			case c.inTx:
				caught = "in a transaction"
			case caught == "idle" && (c.state == "active" || c.state == "Query"):
				caught = "in a statement"
			}
		}
		if caught == "idle" {
			time.Sleep(3 * time.Millisecond)
		}
	}
	id, ok := rl.sigstop(victim)
	if !ok {
		return Pause{}, false, nil // it exited meanwhile (a kill): pick again
	}
	p := Pause{Slot: victim, RelayID: id, Caught: caught, Long: length > 3*e.cfg.LeaseTTL, stoppedAt: time.Now()}
	defer func() {
		rl.sigcont(victim)
		p.resumedAt = time.Now()
	}()
	end := p.stoppedAt.Add(length)
	var mine []int
	for time.Now().Before(end) {
		if owners, err = e.leaseOwners(ctx, in); err != nil {
			return p, true, err
		}
		if mine == nil {
			// Read once the relay is stopped: it cannot take or give up anything any more.
			mine = owned(owners, id)
			p.Owned = len(mine)
		}
		if !p.TakenOver {
			moved := true
			for _, part := range mine {
				if o := owners[part]; o == "" || o == id {
					moved = false
				}
			}
			if moved {
				p.TakenOver, p.Takeover = true, time.Since(p.stoppedAt)
			}
		}
		wait := min(25*time.Millisecond, time.Until(end))
		if p.TakenOver {
			wait = time.Until(end)
		}
		select {
		case <-ctx.Done():
			return p, true, ctx.Err()
		case <-time.After(max(wait, 0)):
		}
	}
	rl.sigcont(victim)
	p.resumedAt = time.Now()
	p.Length = p.resumedAt.Sub(p.stoppedAt)
	return p, true, nil
}

// RunPause is the dedicated pause scenario: Relays relay processes (default 3) and a steady
// stream of writes (Rate, default 200 events/s); once every relay owns partitions and events
// flow, the relay owning the most partitions is SIGSTOPped for 3 x LeaseTTL, mid-batch as far
// as the database can tell (best effort), then SIGCONTed; the writes go on for 2 x LeaseTTL
// and the run drains. Besides Run's checks (no loss, no phantom, per-key order of first
// deliveries, one effect each, no deadlock logged), it fails when the paused relay's partitions
// did not all move to the others within TakeoverBound, or when events committed during the
// pause, early enough for the others to relay them, had not arrived by SIGCONT (Stalled).
// Kills, broker restarts and database cuts are not part of it; Events only caps the writes.
func RunPause(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Rate == 0 {
		cfg.Rate = 200
	}
	if cfg.Events == 0 {
		cfg.Events = 1 << 30 // the scenario stops the writers itself
	}
	cfg.setDefaults()
	start := time.Now()
	res := newResult(cfg)
	e, err := newEnv(ctx, cfg)
	defer e.close()
	if err != nil {
		return res, err
	}
	e.startWriters()

	if err := e.awaitSharedFlow(ctx); err != nil {
		return res, err
	}
	e.logf("%d relays share the partitions and events flow; pausing one for %s", cfg.Relays, 3*cfg.LeaseTTL)
	p, err := e.pauseRelay(ctx, e.insts[0], -1, 3*cfg.LeaseTTL, 3*time.Second)
	if err != nil {
		return res, err
	}
	p.Long = true
	res.Pauses = append(res.Pauses, p)
	e.logf("pause: %s (bound %s)", p, res.TakeoverBound)

	res.Stalled = e.stalledBy(p)

	time.Sleep(2 * cfg.LeaseTTL)
	e.stopWrites.Store(true)
	if err := e.waitWriters(); err != nil {
		return res, err
	}
	res.WriteDuration = e.writeDuration
	if owners, err := e.leaseOwners(ctx, e.insts[0]); err == nil {
		shares := map[string]int{}
		for _, o := range owners {
			shares[o]++
		}
		e.logf("writers done: %d events committed in %s; partitions per relay: %v; draining",
			e.committedCount.Load(), res.WriteDuration.Round(time.Millisecond), shares)
	}
	if err := e.finish(ctx, &res); err != nil {
		return res, err
	}
	if !p.TakenOver || p.Takeover > res.TakeoverBound {
		res.SlowTakeovers++
	}
	res.Duration = time.Since(start)
	return res, nil
}

// awaitSharedFlow waits, up to 60 s, until every relay of the first installation owns
// partitions and events flow.
func (e *env) awaitSharedFlow(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		owners, err := e.leaseOwners(ctx, e.insts[0])
		if err != nil {
			return err
		}
		distinct := map[string]bool{}
		for _, o := range owners {
			if o != "" {
				distinct[o] = true
			}
		}
		if len(distinct) >= e.cfg.Relays && e.rec.count() >= 100 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("faultinject: after 60s %d of %d relays own partitions and %d events arrived",
				len(distinct), e.cfg.Relays, e.rec.count())
		}
		select {
		case err := <-e.writeErrs:
			return fmt.Errorf("faultinject: writer: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stalledBy counts the events committed while the relay of p was stopped, up to 1 s before its
// SIGCONT, that had not arrived by SIGCONT: the other relays must have relayed them.
func (e *env) stalledBy(p Pause) int {
	e.outMu.Lock()
	var during []string
	for id, at := range e.out.committedAt {
		if !at.Before(p.stoppedAt) && at.Before(p.resumedAt.Add(-time.Second)) {
			during = append(during, id)
		}
	}
	e.outMu.Unlock()
	stalled := e.rec.notDeliveredBy(during, p.resumedAt)
	e.logf("%d events committed during the pause (until 1s before SIGCONT), %d of them not delivered by SIGCONT",
		len(during), stalled)
	return stalled
}
