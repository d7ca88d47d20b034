// Package faultinject proves outboxkit's contract under faults: writers commit (and roll back)
// events on a real PostgreSQL or MariaDB, several `outboxkit relay` processes forward them to a
// dedicated Kafka or Pulsar while they are SIGKILLed and restarted, SIGSTOPped and resumed, the
// broker is restarted and the relays' database connections are cut; an independent consumer
// then checks that every committed event arrived, no rolled-back one did, per-key order held,
// the idempotent inbox gave each event exactly one effect, a paused relay lost its partitions
// to the others within the lease bound, and no relay logged a deadlock. Run (and RunPause, the
// dedicated pause scenario) are shared by the CI tests and the internal/cmd/faultinject program.
package faultinject

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/outboxkit/outboxkit/outbox"
)

// Config sizes a fault-injection run. Zero values take the defaults in the comments.
type Config struct {
	// Broker is the dedicated broker to use (Kind, ports, state directory). Required: Kind and
	// RepoRoot.
	Broker Broker
	// Dialect is the database: outbox.Postgres or outbox.MySQL (MariaDB, MySQL 8). Default
	// outbox.Postgres.
	Dialect outbox.Dialect
	// DSN is the database: a postgres:// URL (or key=value DSN) for PostgreSQL, a
	// go-sql-driver/mysql DSN for MySQL. Required.
	DSN string
	// Delivery is the relays' forwarder.delivery: "" or at_least_once, or exactly_once (Kafka
	// only), under which a duplicate is a broken guarantee. The consumer reads read_committed
	// either way.
	Delivery string
	// Source is the relays' forwarder.source: "" or polling, or cdc (PostgreSQL only: one relay
	// streams the slot, the others stand by).
	Source string
	// Binary is the outboxkit CLI; empty builds ./cmd/outboxkit into a temporary directory.
	Binary string

	// Events is how many events the writers commit. Default 3000.
	Events int
	// Keys is the number of aggregates the events are spread over. Default 200.
	Keys int
	// Writers is the number of concurrent writer goroutines. Default 4.
	Writers int
	// Rate caps the committed events per second (all writers together); 0 means as fast as
	// possible. Default 0.
	Rate int
	// RollbackShare is the share of transactions rolled back on purpose. Default 0.1.
	RollbackShare float64
	// Relays is the number of relay processes. Default 3.
	Relays int
	// Kills is how many times a relay is SIGKILLed. Default 6.
	Kills int
	// Pauses is how many times a relay is SIGSTOPped, then SIGCONTed after a random duration
	// between LeaseTTL/2 and 4 x LeaseTTL; the first pause and every other one after it last
	// more than 3 x LeaseTTL, and for those the relay's partitions must move to the others
	// within TakeoverBound. Default 2.
	Pauses int
	// NoBrokerRestart, NoDBCut and NoPauses turn those faults off.
	NoBrokerRestart, NoDBCut, NoPauses bool
	// LeaseTTL is the relays' forwarder.lease_ttl (their heartbeat is the CLI's default,
	// LeaseTTL/4). Default 2s.
	LeaseTTL time.Duration
	// BrokerDowntime is how long the broker stays down when it is restarted. Default 2s.
	BrokerDowntime time.Duration
	// DrainTimeout bounds the wait for the last events after the writers are done. Default 3m.
	DrainTimeout time.Duration
	// Seed makes the random choices repeatable; 0 picks one.
	Seed uint64
	// Keep leaves the tables, the relays' config and logs in place.
	Keep bool
	// Logf receives progress lines. Default: none.
	Logf func(format string, args ...any)
}

func (c *Config) setDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if c.Dialect == "" {
		c.Dialect = outbox.Postgres
	}
	def(&c.Events, 3000)
	def(&c.Keys, 200)
	def(&c.Writers, 4)
	def(&c.Relays, 3)
	def(&c.Kills, 6)
	def(&c.Pauses, 2)
	if c.RollbackShare == 0 {
		c.RollbackShare = 0.1
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 2 * time.Second
	}
	if c.BrokerDowntime == 0 {
		c.BrokerDowntime = 2 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 3 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	c.Broker.setDefaults()
}

// delivery is the relays' delivery mode, as the CLI reads it.
func (c Config) delivery() string {
	if c.Delivery == "" {
		return "at_least_once"
	}
	return c.Delivery
}

// source is the relays' source, as the CLI reads it.
func (c Config) source() string {
	if c.Source == "" {
		return "polling"
	}
	return c.Source
}

// heartbeat is the relays' heartbeat interval: the CLI's default, LeaseTTL/4.
func (c Config) heartbeat() time.Duration { return c.LeaseTTL / 4 }

// TakeoverBound is the longest a stalled relay may keep its partitions: its lease runs out
// after at most LeaseTTL, the others notice within another LeaseTTL (their view of its
// liveness) and take the partitions at their next heartbeat.
func (c Config) TakeoverBound() time.Duration {
	if c.LeaseTTL == 0 {
		c.setDefaults()
	}
	return 2*c.LeaseTTL + c.heartbeat()
}

// Pause is one SIGSTOP/SIGCONT of a relay.
type Pause struct {
	Slot    int           // relay slot
	RelayID string        // the paused process's relay id
	Length  time.Duration // from SIGSTOP to SIGCONT
	Owned   int           // partitions it owned at SIGSTOP
	// Caught says what the relay was doing at SIGSTOP, as the database saw its connections:
	// "in a transaction", "in a statement", or "idle" (no batch caught in the time allowed).
	Caught string
	// TakenOver says whether every partition it owned had another owner before SIGCONT;
	// Takeover is the time from SIGSTOP until then.
	TakenOver bool
	Takeover  time.Duration
	// Long marks a pause longer than 3 x LeaseTTL, whose takeover must be within the bound.
	Long bool

	stoppedAt, resumedAt time.Time
}

func (p Pause) String() string {
	s := fmt.Sprintf("%s (slot %d, %d partitions, %s) for %s: ", p.RelayID, p.Slot, p.Owned, p.Caught,
		p.Length.Round(100*time.Millisecond))
	if p.TakenOver {
		return s + "taken over after " + p.Takeover.Round(10*time.Millisecond).String()
	}
	return s + "not taken over"
}

// Result is what a run measured.
type Result struct {
	Broker   string
	Database string
	Delivery string
	Source   string
	Seed     uint64

	Committed  int // events in committed transactions
	RolledBack int // events in transactions rolled back on purpose
	Uncertain  int // events whose commit returned an error (outcome unknown; excluded from checks)
	// WriterAborts counts transactions that failed before COMMIT (a lost connection, a
	// deadlock); their events count as rolled back.
	WriterAborts int
	// WriterDeadlocks counts writer transactions the database aborted as a deadlock or a lock
	// wait timeout (reported, not a broken guarantee: the application would retry them).
	WriterDeadlocks int

	Messages        int // messages read from the topic, duplicates included
	Delivered       int // distinct committed events delivered
	Lost            int // committed events never delivered
	Phantoms        int // distinct rolled-back or unknown events delivered
	OrderViolations int // first deliveries whose per-key sequence went backwards
	Duplicates      int // deliveries beyond the first of an event
	Undecodable     int // messages without an event id or with a bad payload
	DeadLettered    int // rows left dead in the outbox
	Pending         int // rows left pending in the outbox

	Effects          int // effect rows written through the inbox
	InboxDuplicates  uint64
	EffectViolations int // committed events with no effect or more than one
	// DeadlocksLogged counts the lines of the relays' logs reporting a deadlock (PostgreSQL
	// 40P01, MySQL 1213) or a lock wait timeout (MySQL 1205).
	DeadlocksLogged int
	DeadlockSamples []string

	Kills          int
	RelaySelfExits int // relay exits not caused by a kill (e.g. broker down at start)
	BrokerRestarts int
	DBCuts         int // relay connections terminated
	Pauses         []Pause
	// TakeoverBound is the bound the long pauses' takeovers are held to; SlowTakeovers counts
	// the long pauses whose partitions were not all taken over within it.
	TakeoverBound time.Duration
	SlowTakeovers int
	// Stalled counts (RunPause) events committed while a relay was paused, early enough for
	// the others to relay them, that had not arrived when it was resumed.
	Stalled int

	WriteDuration time.Duration
	Duration      time.Duration
	Samples       []string // a few examples of what went wrong
}

// Err reports a broken guarantee: a lost event, a phantom, an order violation, an event without
// exactly one effect, an undecodable message, a deadlock logged by a relay, a paused relay whose
// partitions were not taken over in time, or events stalled behind a paused relay.
func (r Result) Err() error {
	var errs []string
	if r.Lost > 0 {
		errs = append(errs, fmt.Sprintf("%d committed events lost", r.Lost))
	}
	if r.Phantoms > 0 {
		errs = append(errs, fmt.Sprintf("%d phantom events", r.Phantoms))
	}
	if r.OrderViolations > 0 {
		errs = append(errs, fmt.Sprintf("%d per-key order violations", r.OrderViolations))
	}
	if r.EffectViolations > 0 {
		errs = append(errs, fmt.Sprintf("%d events without exactly one effect", r.EffectViolations))
	}
	if r.Delivery == "exactly_once" && r.Duplicates > 0 {
		errs = append(errs, fmt.Sprintf("%d duplicates under exactly-once delivery", r.Duplicates))
	}
	if r.Undecodable > 0 {
		errs = append(errs, fmt.Sprintf("%d undecodable messages", r.Undecodable))
	}
	if r.DeadlocksLogged > 0 {
		errs = append(errs, fmt.Sprintf("%d deadlocks or lock wait timeouts logged by the relays (%s)",
			r.DeadlocksLogged, strings.Join(r.DeadlockSamples, "; ")))
	}
	if r.SlowTakeovers > 0 {
		errs = append(errs, fmt.Sprintf("%d paused relays kept their partitions longer than %s", r.SlowTakeovers, r.TakeoverBound))
	}
	if r.Stalled > 0 {
		errs = append(errs, fmt.Sprintf("%d events stalled behind the paused relay", r.Stalled))
	}
	if len(errs) == 0 {
		return nil
	}
	if len(r.Samples) > 0 {
		errs = append(errs, "e.g. "+strings.Join(r.Samples, "; "))
	}
	return errors.New("faultinject: " + strings.Join(errs, ", "))
}

// Table renders the result as an aligned two-column table.
func (r Result) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("broker", r.Broker)
	row("database", r.Database)
	row("delivery", r.Delivery)
	row("source", r.Source)
	row("events committed", r.Committed)
	row("events rolled back", r.RolledBack)
	row("commit outcome unknown", r.Uncertain)
	row("writer tx aborted (connection lost, deadlock)", r.WriterAborts)
	row("writer deadlocks / lock wait timeouts", r.WriterDeadlocks)
	row("messages consumed", r.Messages)
	row("delivered (distinct)", r.Delivered)
	row("lost", r.Lost)
	row("phantoms", r.Phantoms)
	row("order violations", r.OrderViolations)
	row("duplicates", r.Duplicates)
	row("effects", r.Effects)
	row("events without exactly 1 effect", r.EffectViolations)
	row("inbox duplicates skipped", r.InboxDuplicates)
	row("dead-lettered / pending rows", fmt.Sprintf("%d / %d", r.DeadLettered, r.Pending))
	row("deadlocks logged (relays)", r.DeadlocksLogged)
	row("relay SIGKILLs", r.Kills)
	row("relay self-exits (restarted)", r.RelaySelfExits)
	row("broker restarts", r.BrokerRestarts)
	row("relay DB connections cut", r.DBCuts)
	long := 0
	for _, p := range r.Pauses {
		if p.Long {
			long++
		}
	}
	row("relay pauses (SIGSTOP/SIGCONT)", fmt.Sprintf("%d (%d longer than 3x lease TTL)", len(r.Pauses), long))
	for i, p := range r.Pauses {
		row(fmt.Sprintf("  pause %d", i+1), p)
	}
	if r.TakeoverBound > 0 {
		row("takeover bound / slow takeovers", fmt.Sprintf("%s / %d", r.TakeoverBound, r.SlowTakeovers))
	}
	if r.Stalled > 0 {
		row("events stalled behind the paused relay", r.Stalled)
	}
	row("write phase", r.WriteDuration.Round(100*time.Millisecond))
	row("total", r.Duration.Round(100*time.Millisecond))
	row("seed", r.Seed)
	_ = tw.Flush()
	return b.String()
}

// Run performs one fault-injection run and returns what it measured. The error reports a run
// that could not be carried out (a service missing, a fault that could not be injected);
// broken guarantees are in Result.Err.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.setDefaults()
	start := time.Now()
	res := Result{Broker: cfg.Broker.Kind, Database: string(cfg.Dialect), Delivery: cfg.delivery(), Source: cfg.source(), Seed: cfg.Seed, TakeoverBound: cfg.TakeoverBound()}
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	e, err := newEnv(ctx, cfg)
	defer e.close()
	if err != nil {
		return res, err
	}
	e.startWriters()

	// The fault schedule, by progress of the writers: kills at random points, one broker restart
	// at 35 %, one database cut at 65 %, a long pause at 25 % and the other pauses spread over the rest.
	type fault struct {
		at    float64
		kind  string
		pause time.Duration
	}
	var faults []fault
	for range cfg.Kills {
		faults = append(faults, fault{at: 0.05 + 0.9*rng.Float64(), kind: "kill"})
	}
	if !cfg.NoBrokerRestart {
		faults = append(faults, fault{at: 0.35, kind: "broker"})
	}
	if !cfg.NoDBCut {
		faults = append(faults, fault{at: 0.65, kind: "dbcut"})
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
			faults = append(faults, fault{at: at, kind: "pause", pause: d})
		}
	}
	sort.SliceStable(faults, func(i, j int) bool { return faults[i].at < faults[j].at })
	var (
		faultErr  error
		lastFault time.Time
		pauseMu   sync.Mutex // one pause at a time
		pausesWG  sync.WaitGroup
		resMu     sync.Mutex
	)
	for _, f := range faults {
		for e.committedCount.Load() < int64(f.at*float64(cfg.Events)) && !e.writersDone() {
			select {
			case err := <-e.writeErrs:
				return res, fmt.Errorf("faultinject: writer: %w", err)
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		// Faults the writers' progress bunched together (after the broker restart) are still
		// spread a little, so each relay restart is a separate incident.
		if !lastFault.IsZero() {
			if d := time.Until(lastFault.Add(500 * time.Millisecond)); d > 0 {
				time.Sleep(d)
			}
		}
		lastFault = time.Now()
		switch f.kind {
		case "kill":
			if e.rl.kill() {
				e.logf("SIGKILLed a relay at %.0f%%", 100*f.at)
			} else {
				e.logf("no relay running to kill at %.0f%%", 100*f.at)
			}
		case "broker":
			e.logf("restarting the broker at %.0f%% (down for %s)", 100*f.at, cfg.BrokerDowntime)
			if err := cfg.Broker.Restart(ctx, cfg.BrokerDowntime); err != nil {
				faultErr = err
			} else {
				res.BrokerRestarts++
				e.logf("broker back")
			}
		case "dbcut":
			n, err := e.cutRelayConnections(ctx)
			if err != nil {
				faultErr = err
			}
			res.DBCuts += n
			e.logf("terminated %d relay database connections at %.0f%%", n, 100*f.at)
		case "pause":
			pausesWG.Add(1)
			go func() {
				defer pausesWG.Done()
				pauseMu.Lock()
				defer pauseMu.Unlock()
				e.logf("pausing a relay at %.0f%% for %s", 100*f.at, f.pause.Round(100*time.Millisecond))
				p, err := e.pauseRelay(ctx, -1, f.pause, time.Second)
				resMu.Lock()
				defer resMu.Unlock()
				if err != nil {
					faultErr = err
					return
				}
				e.logf("pause: %s", p)
				res.Pauses = append(res.Pauses, p)
			}()
		}
	}
	if err := e.waitWriters(); err != nil {
		return res, err
	}
	pausesWG.Wait()
	res.WriteDuration = e.writeDuration
	if faultErr != nil {
		return res, faultErr
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
	if res.Kills < cfg.Kills {
		return res, fmt.Errorf("faultinject: only %d of %d relay kills happened", res.Kills, cfg.Kills)
	}
	if !cfg.NoPauses && len(res.Pauses) < cfg.Pauses {
		return res, fmt.Errorf("faultinject: only %d of %d relay pauses happened", len(res.Pauses), cfg.Pauses)
	}
	if !cfg.NoDBCut && res.DBCuts == 0 {
		return res, errors.New("faultinject: the database cut terminated no relay connection")
	}
	return res, nil
}
