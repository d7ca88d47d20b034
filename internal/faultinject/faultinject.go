// Package faultinject proves outboxkit's contract under faults: writers commit (and roll back)
// events on a real PostgreSQL or MariaDB, several `outboxkit relay` processes forward them to a
// dedicated Kafka or Pulsar while they are SIGKILLed and restarted, SIGSTOPped and resumed, the
// broker is restarted and the relays' database connections are cut; an independent consumer
// then checks that every committed event arrived, no rolled-back one did, per-key order held,
// the idempotent inbox gave each event exactly one effect, a paused relay lost its partitions
// to the others within the lease bound, and no relay logged a deadlock. Config's deployment
// fields run the same checks on other shapes: several installations sharing the database
// server and the broker, a configured table name (mixed case, schema-qualified), poison events
// over the broker's limit among live keys. Run (and RunPause, the dedicated pause scenario) are
// shared by the CI tests and the internal/cmd/faultinject program.
package faultinject

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// fault is one scheduled fault: its kind ("kill", "broker", "dbcut", "pause", "discard") at a point of the
// writers' progress (a share of Config.Events), the length of a pause, and its number among the
// faults of its kind (which installation it hits).
type fault struct {
	at    float64
	kind  string
	pause time.Duration
	nth   int
}

// schedule places the faults by progress of the writers: kills at random points, one broker
// restart at 35 %, one database cut at 65 %, a long pause at 25 % and the other pauses spread
// over the rest.
func schedule(cfg Config, rng *rand.Rand) []fault {
	var faults []fault
	for k := range cfg.Kills {
		faults = append(faults, fault{at: 0.05 + 0.9*rng.Float64(), kind: "kill", nth: k})
	}
	if !cfg.NoBrokerRestart {
		for k := range cfg.BrokerRestarts {
			at := 0.35 // one restart: at 35 %; several: spread from 20 % to 70 %
			if cfg.BrokerRestarts > 1 {
				at = 0.2 + 0.5*float64(k)/float64(cfg.BrokerRestarts-1)
			}
			faults = append(faults, fault{at: at, kind: "broker", nth: k})
		}
	}
	if !cfg.NoDBCut {
		faults = append(faults, fault{at: 0.65, kind: "dbcut"})
	}
	if cfg.DiscardAt > 0 && cfg.PoisonEvents > 0 {
		faults = append(faults, fault{at: cfg.DiscardAt, kind: "discard"})
	}
	if !cfg.NoPauses {
		for i := range cfg.Pauses {
			ttl := float64(cfg.LeaseTTL)
			d := time.Duration(ttl/2 + 3.5*ttl*rng.Float64()) // LeaseTTL/2 .. 4 x LeaseTTL
			if i%2 == 0 {
				d = time.Duration(3.25*ttl + 0.75*ttl*rng.Float64()) // 3.25 .. 4 x LeaseTTL
			}
			at := 0.25 // once the relays share the partitions
			if i > 0 {
				at = 0.3 + 0.55*rng.Float64()
			}
			faults = append(faults, fault{at: at, kind: "pause", pause: d, nth: i})
		}
	}
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].at < faults[j].at })
	return faults
}

// injector carries out the faults of one run and collects what they did.
type injector struct {
	e         *env
	rng       *rand.Rand // the draws of the faults' timing (Config.DueGrid)
	res       *Result
	lastFault time.Time
	pauseMu   sync.Mutex // one pause at a time
	pausesWG  sync.WaitGroup
	mu        sync.Mutex // guards res and err from the pauses' goroutines
	err       error
}

func (in *injector) fail(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil {
		in.err = err
	}
}

// await waits until the writers reach f's point (or are done).
func (in *injector) await(ctx context.Context, f fault) error {
	e := in.e
	for e.committedCount.Load() < int64(f.at*float64(e.cfg.Events)) && !e.writersDone() {
		select {
		case err := <-e.writeErrs:
			return fmt.Errorf("faultinject: writer: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Faults the writers' progress bunched together (after the broker restart) are still
	// spread a little, so each relay restart is a separate incident.
	if !in.lastFault.IsZero() {
		if d := time.Until(in.lastFault.Add(500 * time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
	}
	in.lastFault = time.Now()
	return nil
}

// inject carries out f; a pause runs in a goroutine of its own (pausesWG).
func (in *injector) inject(ctx context.Context, f fault) {
	e := in.e
	target := e.insts[f.nth%len(e.insts)] // kills and pauses take the installations in turn
	switch f.kind {
	case "kill":
		if e.sched != nil && e.cfg.DueGrid > 0 {
			due, offset := e.awaitDueMoment(ctx, in.rng)
			e.logf("killing a relay %+dms from %s, when scheduled events come due", offset.Milliseconds(), due.UTC().Format("15:04:05.000"))
		}
		if e.cfg.source() == "wal" && f.nth%2 == 0 {
			in.killStreamer(ctx, target, f)
			return
		}
		if target.rl.kill() {
			e.logf("SIGKILLed a relay of installation %d at %.0f%%", target.index, 100*f.at)
		} else {
			e.logf("no relay running to kill at %.0f%%", 100*f.at)
		}
	case "broker":
		e.logf("restarting the broker (restart %d) at %.0f%% (down for %s)", f.nth+1, 100*f.at, e.cfg.BrokerDowntime)
		node, err := e.cfg.Broker.RestartOne(ctx, f.nth, e.cfg.BrokerDowntime)
		if err != nil {
			in.fail(err)
			return
		}
		in.res.BrokerRestarts++
		e.logf("broker back (cluster node %d; 0 for a single broker)", node)
	case "discard":
		in.discardUnderLoad(ctx, f)
	case "dbcut":
		n, err := e.cutRelayConnections(ctx)
		if err != nil {
			in.fail(err)
		}
		in.res.DBCuts += n
		e.logf("terminated %d relay database connections at %.0f%%", n, 100*f.at)
	case "pause":
		in.pausesWG.Add(1)
		go func() {
			defer in.pausesWG.Done()
			in.pauseMu.Lock()
			defer in.pauseMu.Unlock()
			e.logf("pausing a relay of installation %d at %.0f%% for %s", target.index, 100*f.at, f.pause.Round(100*time.Millisecond))
			p, err := e.pauseRelay(ctx, target, -1, f.pause, time.Second)
			if err != nil {
				in.fail(err)
				return
			}
			e.logf("pause: %s", p)
			in.mu.Lock()
			in.res.Pauses = append(in.res.Pauses, p)
			in.mu.Unlock()
		}()
	}
}

// newResult is a Result naming the run's shape.
func newResult(cfg Config) Result {
	table := cfg.Table
	if table == "" && cfg.Installations > 1 {
		table = "outbox_events (default)"
	}
	return Result{Broker: cfg.Broker.Kind, Database: string(cfg.Dialect), Delivery: cfg.delivery(), Source: cfg.source(),
		Seed: cfg.Seed, TakeoverBound: cfg.TakeoverBound(), Installations: cfg.Installations, OutboxTable: table,
		MaxAttempts: cfg.maxAttempts(), Schema: cfg.Schema}
}

// Run performs one fault-injection run and returns what it measured. The error reports a run
// that could not be carried out (a service missing, a fault that could not be injected);
// broken guarantees are in Result.Err.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.setDefaults()
	start := time.Now()
	res := newResult(cfg)
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	e, err := newEnv(ctx, cfg)
	defer e.close()
	if err != nil {
		return res, err
	}
	e.startWriters()
	inj := &injector{e: e, res: &res, rng: rand.New(rand.NewPCG(cfg.Seed, 11))}
	for _, f := range schedule(cfg, rng) {
		if err := inj.await(ctx, f); err != nil {
			return res, err
		}
		inj.inject(ctx, f)
	}
	e.holdWriters.Store(false) // the discard under load released them, unless it failed
	if err := e.waitWriters(); err != nil {
		return res, err
	}
	inj.pausesWG.Wait()
	res.WriteDuration = e.writeDuration
	if inj.err != nil {
		return res, inj.err
	}
	if cfg.CalmEvents > 0 {
		e.logf("faults over: %d more events, the relays left alone", cfg.CalmEvents)
		if err := e.writeCalm(ctx, cfg.CalmEvents); err != nil {
			return res, err
		}
	}
	e.logf("writers done: %d events committed in %s; draining", e.committedCount.Load(), res.WriteDuration.Round(time.Millisecond))
	if err := e.finish(ctx, &res); err != nil {
		return res, err
	}
	for _, p := range res.Pauses {
		if p.Long && (!p.TakenOver || p.Takeover > res.TakeoverBound) {
			res.SlowTakeovers++
		}
	}
	res.Duration = time.Since(start)
	return res, cfg.checkFaults(res)
}

// checkFaults reports a run whose faults did not all happen.
func (c Config) checkFaults(res Result) error {
	if res.Kills < c.Kills {
		return fmt.Errorf("faultinject: only %d of %d relay kills happened", res.Kills, c.Kills)
	}
	if !c.NoPauses && len(res.Pauses) < c.Pauses {
		return fmt.Errorf("faultinject: only %d of %d relay pauses happened", len(res.Pauses), c.Pauses)
	}
	if !c.NoDBCut && res.DBCuts == 0 {
		return errors.New("faultinject: the database cut terminated no relay connection")
	}
	return nil
}
