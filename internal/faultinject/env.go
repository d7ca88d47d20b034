package faultinject

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outboxkit/middleware"
	"github.com/outboxkit/outboxkit/outbox"
)

// outcome of the written events.
type outcome struct {
	committed, rolledBack, uncertain map[string]bool
	committedAt                      map[string]time.Time
	// poison holds the committed poison events (Config.PoisonEvents), kept out of committed:
	// they must end dead-lettered, not delivered.
	poison map[string]bool
	// installation is the index of the installation that wrote each event.
	installation map[string]int
}

// env is one run's world: the database, its installations (tables, writers, supervised
// relays), the independent consumer and the writers. newEnv builds it; close tears down what
// Keep does not keep.
type env struct {
	cfg  Config
	logf func(format string, args ...any)

	db                       *sql.DB // the run's pool: the consumer's tables, fault injection
	insts                    []*installation
	name, topic              string
	effectsTable, inboxTable string
	workDir, bin             string

	rec          *recorder
	reg          *registry       // the schema variant's registry side (Config.Schema); nil otherwise
	sched        *scheduleLedger // the scheduled variant's ledger (Config.Scheduled); nil otherwise
	dlqDone      chan error
	inbox        *middleware.Inbox
	stopConsumer context.CancelFunc
	consumerDone chan error
	relaysDone   bool

	committedCount, aborted, writerDeadlocks atomic.Int64
	poisonClaimed                            atomic.Int64
	discarded                                map[string]poisonRow // poison rows as they were when the run discarded them
	rediscarded                              int                  // discarded poison events found dead again later (parked anew)
	poisonKeys                               map[string]bool      // the keys poison events took (guarded by outMu)
	outMu                                    sync.Mutex
	out                                      outcome
	stopWrites                               atomic.Bool
	// holdWriters keeps the writers writing past Config.Events until the discard under load
	// (Config.DiscardAt) is done.
	holdWriters   atomic.Bool
	writersWG     sync.WaitGroup
	writersLeft   atomic.Int64
	writeErrs     chan error
	writeStart    time.Time
	writeDuration time.Duration
	stopWriterCtx context.CancelFunc
	cleanups      []func()
}

func (e *env) defer_(f func()) { e.cleanups = append(e.cleanups, f) }

// close stops what still runs and removes what the run created (unless Keep), last first.
func (e *env) close() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}

func driver(d outbox.Dialect) string {
	if d == outbox.MySQL {
		return "mysql"
	}
	return "pgx"
}

// q turns the ? placeholders of query into PostgreSQL's $n when the run is on PostgreSQL.
func (e *env) q(query string) string {
	if e.cfg.Dialect != outbox.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// newEnv creates the installations' tables, starts the dedicated broker, the consumer and the
// relays. The returned env is never nil: call close even after an error.
func newEnv(ctx context.Context, cfg Config) (*env, error) {
	e := &env{cfg: cfg, writeErrs: make(chan error, cfg.Writers), discarded: map[string]poisonRow{},
		out: outcome{committed: map[string]bool{}, rolledBack: map[string]bool{}, uncertain: map[string]bool{},
			committedAt: map[string]time.Time{}, poison: map[string]bool{}, installation: map[string]int{}}}
	e.logf = func(format string, args ...any) { cfg.Logf(time.Now().Format("15:04:05.000 ")+format, args...) }
	if err := cfg.validate(); err != nil {
		return e, err
	}
	if cfg.Scheduled > 0 {
		e.sched = newScheduleLedger()
	}
	e.logf("starting the dedicated %s (state %s)", cfg.Broker.Kind, cfg.Broker.StateDir)
	if err := cfg.Broker.Start(ctx); err != nil {
		return e, err
	}
	if err := e.prepare(ctx); err != nil {
		return e, err
	}
	e.name = fmt.Sprintf("fault_%s_%s_%d", cfg.Dialect, strings.ReplaceAll(cfg.Broker.Kind, "-", "_"), time.Now().UnixNano()%1e9)
	e.topic = strings.ReplaceAll(e.name, "_", "-")
	e.effectsTable, e.inboxTable = e.name+"_effects", e.name+"_inbox"
	if e.cfg.source() == "wal" && e.cfg.WALSlot == "" {
		e.cfg.WALSlot = e.name + "_wal"
	}
	if err := e.newInstallations(ctx); err != nil {
		return e, err
	}
	if err := e.registerSchema(ctx); err != nil {
		return e, err
	}
	if err := e.startConsumer(ctx); err != nil {
		return e, err
	}
	return e, e.startRelays()
}

// prepare makes the work directory, builds the CLI unless Config.Binary names one, and opens
// the run's database pool.
func (e *env) prepare(ctx context.Context) error {
	cfg := e.cfg
	var err error
	if e.workDir, err = os.MkdirTemp("", "faultinject-"); err != nil {
		return err
	}
	if !cfg.Keep {
		e.defer_(func() { _ = os.RemoveAll(e.workDir) })
	} else {
		e.logf("work directory (relay configs and logs): %s", e.workDir)
	}
	if e.bin = cfg.Binary; e.bin == "" {
		e.logf("building outboxkit")
		if e.bin, err = BuildCLI(ctx, cfg.Broker.RepoRoot, e.workDir); err != nil {
			return err
		}
	}
	if e.db, err = sql.Open(driver(cfg.Dialect), cfg.DSN); err != nil {
		return fmt.Errorf("faultinject: open %s: %w", cfg.Dialect, err)
	}
	e.defer_(func() { _ = e.db.Close() })
	e.db.SetMaxOpenConns(cfg.Writers + 12)
	if err := e.db.PingContext(ctx); err != nil {
		return fmt.Errorf("faultinject: %s: %w", cfg.Dialect, err)
	}
	return nil
}

// startConsumer creates the effects table and starts the independent consumer, with the inbox
// on the run's database (its own pool).
func (e *env) startConsumer(ctx context.Context) error {
	textType := "text"
	if e.cfg.Dialect == outbox.MySQL {
		textType = "VARCHAR(64)"
	}
	if !e.cfg.Keep {
		e.defer_(func() {
			for _, t := range []string{e.effectsTable, e.inboxTable, e.inboxTable + "_migrations"} {
				_, _ = e.db.Exec("DROP TABLE IF EXISTS " + t)
			}
		})
	}
	if _, err := e.db.ExecContext(ctx, "CREATE TABLE "+e.effectsTable+" (event_id "+textType+" NOT NULL)"); err != nil {
		return fmt.Errorf("faultinject: create %s: %w", e.effectsTable, err)
	}
	handler, inbox, err := newEffectHandler(e.db, e.cfg.Dialect, e.inboxTable, e.q("INSERT INTO "+e.effectsTable+" (event_id) VALUES (?)"))
	if err != nil {
		return err
	}
	e.inbox = inbox
	e.rec = newRecorder(4, handler)
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	e.stopConsumer = stopConsumer
	e.consumerDone = make(chan error, 1)
	go func() {
		switch e.cfg.Broker.Kind {
		case Pulsar:
			e.consumerDone <- consumePulsar(consumeCtx, e.cfg.Broker.Addr(), "persistent://public/default/"+e.topic, e.rec)
		case NATS:
			e.consumerDone <- consumeNATS(consumeCtx, e.cfg.Broker.Addr(), e.topic, e.rec)
		case RabbitMQ:
			e.consumerDone <- consumeRabbitMQ(consumeCtx, e.cfg.Broker.Addr(), e.topic, e.rec)
		default:
			e.consumerDone <- consumeKafka(consumeCtx, e.cfg.Broker.Addrs(), e.topic, e.rec, e.reg)
		}
	}()
	if e.reg != nil {
		e.dlqDone = make(chan error, 1)
		go func() { e.dlqDone <- e.reg.consumeDeadLetters(consumeCtx, e.cfg.Broker.Addrs(), e.topic+"-dlq") }()
	}
	e.defer_(stopConsumer)
	return nil
}

// finish waits until every committed event was delivered and every poison event was dead-
// lettered or delivered (or the drain timeout), then discards the dead poison events as an
// operator would and waits for the events held behind them, stops the relays cleanly, lets late duplicates
// arrive, scans the relays' logs and fills the checks of res.
func (e *env) finish(ctx context.Context, res *Result) error {
	deadline := time.Now().Add(e.cfg.DrainTimeout)
	if err := e.waitUntil(ctx, deadline, e.drained); err != nil {
		return err
	}
	if e.cfg.PoisonEvents > 0 {
		held, err := e.discardPoison(ctx)
		if err != nil {
			return err
		}
		res.HeldBehindDead = held
		res.PoisonDeadAgain = e.rediscarded
		allArrived := func(context.Context) bool { return e.rec.missing(e.out.committed) == 0 }
		if err := e.waitUntil(ctx, deadline, allArrived); err != nil {
			return err
		}
	}
	e.stopRelays(20 * time.Second)
	e.relaysDone = true
	for e.rec.idleFor() < 2*time.Second && time.Now().Before(deadline.Add(10*time.Second)) {
		time.Sleep(200 * time.Millisecond)
	}
	e.stopConsumer()
	if err := <-e.consumerDone; err != nil {
		return err
	}
	if e.dlqDone != nil {
		if err := <-e.dlqDone; err != nil {
			return err
		}
	}
	if err := e.rec.closeInbox(); err != nil {
		return err
	}
	var logs []string
	for _, in := range e.insts {
		kills, selfExits, _, _ := in.rl.counts()
		res.Kills += kills
		res.RelaySelfExits += selfExits
		logs = append(logs, in.rl.logPaths()...)
	}
	res.WriterAborts = int(e.aborted.Load())
	res.WriterDeadlocks = int(e.writerDeadlocks.Load())
	res.InboxDuplicates = e.inbox.Stats().Duplicates
	n, samples, err := scanLockTrouble(logs)
	if err != nil {
		return fmt.Errorf("faultinject: scan relay logs: %w", err)
	}
	res.DeadlocksLogged, res.DeadlockSamples = n, samples
	return e.analyze(ctx, res)
}

// waitUntil polls done every 200 ms until it holds or deadline passes.
func (e *env) waitUntil(ctx context.Context, deadline time.Time, done func(context.Context) bool) error {
	for time.Now().Before(deadline) && !done(ctx) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
