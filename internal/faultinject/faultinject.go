// Package faultinject proves outboxkit's contract under faults: writers commit (and roll back)
// events on a real PostgreSQL, several `outboxkit relay` processes forward them to a dedicated
// Kafka or Pulsar while they are SIGKILLed and restarted, the broker is restarted and the relays'
// database connections are cut; an independent consumer then checks that every committed event
// arrived, no rolled-back one did, per-key order held, and the idempotent inbox gave each event
// exactly one effect. Run is shared by the CI test and the internal/cmd/faultinject program.
package faultinject

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/outbox"
)

// Config sizes a fault-injection run. Zero values take the defaults in the comments.
type Config struct {
	// Broker is the dedicated broker to use (Kind, ports, state directory). Required: Kind and
	// RepoRoot.
	Broker Broker
	// PostgresDSN is the database (a postgres:// URL). Required.
	PostgresDSN string
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
	// NoBrokerRestart and NoDBCut turn those faults off.
	NoBrokerRestart, NoDBCut bool
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
	def(&c.Events, 3000)
	def(&c.Keys, 200)
	def(&c.Writers, 4)
	def(&c.Relays, 3)
	def(&c.Kills, 6)
	if c.RollbackShare == 0 {
		c.RollbackShare = 0.1
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

// Result is what a run measured.
type Result struct {
	Broker string
	Seed   uint64

	Committed  int // events in committed transactions
	RolledBack int // events in transactions rolled back on purpose
	Uncertain  int // events whose commit returned an error (outcome unknown; excluded from checks)
	// WriterAborts counts transactions that failed before COMMIT (a lost connection); their
	// events count as rolled back.
	WriterAborts int

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
	Kills            int
	RelaySelfExits   int // relay exits not caused by a kill (e.g. broker down at start)
	BrokerRestarts   int
	DBCuts           int // relay connections terminated
	WriteDuration    time.Duration
	Duration         time.Duration
	Samples          []string // a few examples of what went wrong
}

// Err reports a broken guarantee: a lost event, a phantom, an order violation, an event without
// exactly one effect, or an undecodable message.
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
	if r.Undecodable > 0 {
		errs = append(errs, fmt.Sprintf("%d undecodable messages", r.Undecodable))
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
	row("events committed", r.Committed)
	row("events rolled back", r.RolledBack)
	row("commit outcome unknown", r.Uncertain)
	row("writer tx aborted (connection lost)", r.WriterAborts)
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
	row("relay SIGKILLs", r.Kills)
	row("relay self-exits (restarted)", r.RelaySelfExits)
	row("broker restarts", r.BrokerRestarts)
	row("relay DB connections cut", r.DBCuts)
	row("write phase", r.WriteDuration.Round(100*time.Millisecond))
	row("total", r.Duration.Round(100*time.Millisecond))
	row("seed", r.Seed)
	_ = tw.Flush()
	return b.String()
}

// outcome of one written event.
type outcome struct {
	committed, rolledBack, uncertain map[string]bool
}

// Run performs one fault-injection run and returns what it measured. The error reports a run
// that could not be carried out (a service missing, a fault that could not be injected);
// broken guarantees are in Result.Err.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.setDefaults()
	start := time.Now()
	res := Result{Broker: cfg.Broker.Kind, Seed: cfg.Seed}
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	logf := func(format string, args ...any) {
		cfg.Logf(time.Now().Format("15:04:05.000 ")+format, args...)
	}

	if cfg.PostgresDSN == "" || cfg.Broker.RepoRoot == "" {
		return res, errors.New("faultinject: Config.PostgresDSN and Config.Broker.RepoRoot are required")
	}
	logf("starting the dedicated %s (state %s)", cfg.Broker.Kind, cfg.Broker.StateDir)
	if err := cfg.Broker.Start(ctx); err != nil {
		return res, err
	}

	workDir, err := os.MkdirTemp("", "faultinject-")
	if err != nil {
		return res, err
	}
	if !cfg.Keep {
		defer os.RemoveAll(workDir)
	}
	bin := cfg.Binary
	if bin == "" {
		logf("building outboxkit")
		if bin, err = BuildCLI(ctx, cfg.Broker.RepoRoot, workDir); err != nil {
			return res, err
		}
	}

	db, err := sql.Open("pgx", cfg.PostgresDSN)
	if err != nil {
		return res, fmt.Errorf("faultinject: open %s: %w", "postgres", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(cfg.Writers + 12)
	if err := db.PingContext(ctx); err != nil {
		return res, fmt.Errorf("faultinject: postgres: %w", err)
	}

	name := fmt.Sprintf("fault_%s_%d", cfg.Broker.Kind, time.Now().UnixNano()%1e9)
	topic := strings.ReplaceAll(name, "_", "-")
	table, err := outbox.NewTable(outbox.Postgres, name)
	if err != nil {
		return res, err
	}
	keysTable, effectsTable := name+"_keys", name+"_effects"
	if err := outbox.Migrate(ctx, db, table); err != nil {
		return res, fmt.Errorf("faultinject: migrate: %w", err)
	}
	setup := []string{
		"CREATE TABLE " + keysTable + " (k text PRIMARY KEY, seq bigint NOT NULL DEFAULT 0)",
		fmt.Sprintf("INSERT INTO %s (k) SELECT 'key-' || lpad(i::text, 5, '0') FROM generate_series(1, %d) i", keysTable, cfg.Keys),
		"CREATE TABLE " + effectsTable + " (event_id text NOT NULL)",
	}
	for _, q := range setup {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return res, fmt.Errorf("faultinject: %s: %w", q, err)
		}
	}
	inboxTable := name + "_inbox"
	if !cfg.Keep {
		defer func() {
			for _, t := range []string{table.Events(), table.Leases(), table.Relays(), table.Migrations(),
				keysTable, effectsTable, inboxTable} {
				_, _ = db.Exec("DROP TABLE IF EXISTS " + t)
			}
		}()
	}

	// The independent consumer, with the inbox on the same PostgreSQL (its own pool).
	handler, inbox, err := newEffectHandler(db, inboxTable, effectsTable)
	if err != nil {
		return res, err
	}
	rec := newRecorder(4, handler)
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan error, 1)
	go func() {
		if cfg.Broker.Kind == Pulsar {
			consumerDone <- consumePulsar(consumeCtx, cfg.Broker.Addr(), "persistent://public/default/"+topic, rec)
		} else {
			consumerDone <- consumeKafka(consumeCtx, cfg.Broker.Addr(), topic, rec)
		}
	}()
	defer stopConsumer()

	// The relays' configuration: their connections carry an application_name of their own, so
	// the database cut below terminates theirs only.
	appName := "outboxkit-fault-relay-" + name
	configPath := filepath.Join(workDir, "relay.yaml")
	if err := writeRelayConfig(configPath, cfg, withAppName(cfg.PostgresDSN, appName), table.Events(), topic+"-dlq"); err != nil {
		return res, err
	}
	logf("starting %d relays (%s), config %s", cfg.Relays, bin, configPath)
	rl := startRelays(bin, configPath, workDir, cfg.Relays, cfg.Seed)
	relaysStopped := false
	defer func() {
		if !relaysStopped {
			rl.stop(10 * time.Second)
		}
	}()

	// Writers.
	var committedCount, aborted atomic.Int64
	out := outcome{committed: map[string]bool{}, rolledBack: map[string]bool{}, uncertain: map[string]bool{}}
	var outMu sync.Mutex
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: name})
	if err != nil {
		return res, err
	}
	writeCtx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	var writersWG sync.WaitGroup
	writeErrs := make(chan error, cfg.Writers)
	writeStart := time.Now()
	for w := range cfg.Writers {
		wrng := rand.New(rand.NewPCG(cfg.Seed, uint64(100+w)))
		writersWG.Add(1)
		go func() {
			defer writersWG.Done()
			consecutive := 0
			for writeCtx.Err() == nil && committedCount.Load() < int64(cfg.Events) {
				if cfg.Rate > 0 {
					due := writeStart.Add(time.Duration(float64(committedCount.Load()) / float64(cfg.Rate) * float64(time.Second)))
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				}
				ids, ok, err := writeTx(writeCtx, db, writer, keysTable, topic, cfg.Keys, wrng, wrng.Float64() < cfg.RollbackShare)
				var commitErr *commitError
				failedBeforeCommit := err != nil && !errors.As(err, &commitErr)
				if failedBeforeCommit {
					// Nothing committed (the connection may have been cut by another test
					// sharing the database): its events count as rolled back.
					if writeCtx.Err() != nil {
						return
					}
					aborted.Add(1)
					if consecutive++; consecutive > 50 {
						writeErrs <- err
						return
					}
					time.Sleep(50 * time.Millisecond)
				} else {
					consecutive = 0
				}
				outMu.Lock()
				for _, id := range ids {
					switch {
					case failedBeforeCommit:
						out.rolledBack[id] = true
					case err != nil:
						out.uncertain[id] = true
					case ok:
						out.committed[id] = true
					default:
						out.rolledBack[id] = true
					}
				}
				outMu.Unlock()
				if err == nil && ok {
					committedCount.Add(int64(len(ids)))
				}
			}
		}()
	}

	// The fault schedule, by progress of the writers: kills at random points, one broker restart
	// at 35 %, one database cut at 65 %.
	type fault struct {
		at   float64
		kind string
	}
	var faults []fault
	for range cfg.Kills {
		faults = append(faults, fault{0.05 + 0.9*rng.Float64(), "kill"})
	}
	if !cfg.NoBrokerRestart {
		faults = append(faults, fault{0.35, "broker"})
	}
	if !cfg.NoDBCut {
		faults = append(faults, fault{0.65, "dbcut"})
	}
	sort.Slice(faults, func(i, j int) bool { return faults[i].at < faults[j].at })
	var faultErr error
	var lastFault time.Time
	for _, f := range faults {
		for committedCount.Load() < int64(f.at*float64(cfg.Events)) {
			select {
			case err := <-writeErrs:
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
			if rl.kill() {
				logf("SIGKILLed a relay at %.0f%%", 100*f.at)
			} else {
				logf("no relay running to kill at %.0f%%", 100*f.at)
			}
		case "broker":
			logf("restarting the broker at %.0f%% (down for %s)", 100*f.at, cfg.BrokerDowntime)
			if err := cfg.Broker.Restart(ctx, cfg.BrokerDowntime); err != nil {
				faultErr = err
			} else {
				res.BrokerRestarts++
				logf("broker back")
			}
		case "dbcut":
			n, err := cutConnections(ctx, db, appName)
			if err != nil {
				faultErr = err
			}
			res.DBCuts += n
			logf("terminated %d relay database connections at %.0f%%", n, 100*f.at)
		}
	}
	writersWG.Wait()
	select {
	case err := <-writeErrs:
		return res, fmt.Errorf("faultinject: writer: %w", err)
	default:
	}
	res.WriteDuration = time.Since(writeStart)
	if faultErr != nil {
		return res, faultErr
	}
	logf("writers done: %d events committed in %s; draining", committedCount.Load(), res.WriteDuration.Round(time.Millisecond))

	// Drain: wait until every committed event was delivered (or the timeout), then stop the
	// relays cleanly and let late duplicates arrive.
	deadline := time.Now().Add(cfg.DrainTimeout)
	for time.Now().Before(deadline) && rec.missing(out.committed) > 0 {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	rl.stop(20 * time.Second)
	relaysStopped = true
	for rec.idleFor() < 2*time.Second && time.Now().Before(deadline.Add(10*time.Second)) {
		time.Sleep(200 * time.Millisecond)
	}
	stopConsumer()
	if err := <-consumerDone; err != nil {
		return res, err
	}
	if err := rec.closeInbox(); err != nil {
		return res, err
	}

	res.Kills, res.RelaySelfExits, _ = rl.counts()
	res.WriterAborts = int(aborted.Load())
	res.InboxDuplicates = inbox.Stats().Duplicates
	if err := analyze(ctx, db, &res, out, rec.deliveries, table.Events(), effectsTable); err != nil {
		return res, err
	}
	res.Duration = time.Since(start)
	if res.Kills < cfg.Kills {
		return res, fmt.Errorf("faultinject: only %d of %d relay kills happened", res.Kills, cfg.Kills)
	}
	if !cfg.NoDBCut && res.DBCuts == 0 {
		return res, errors.New("faultinject: the database cut terminated no relay connection")
	}
	return res, nil
}

// writeTx commits (or, when rollback, rolls back) one transaction that advances 1-3 keys'
// counters and writes one event per key carrying the key's new sequence number. The counter
// row lock serializes transactions of one key, so sequence order is commit order, and a rolled
// back transaction leaves no gap among the committed numbers. It returns the event ids, whether
// they committed, and an error when the outcome is unknown or nothing was written.
func writeTx(ctx context.Context, db *sql.DB, w *outbox.Writer, keysTable, topic string, nkeys int,
	rng *rand.Rand, rollback bool) ([]string, bool, error) {
	n := 1 + rng.IntN(3)
	keys := make([]string, 0, n)
	for len(keys) < n {
		k := fmt.Sprintf("key-%05d", 1+rng.IntN(nkeys))
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // one lock order for every transaction: no deadlocks
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	events := make([]outbox.Event, 0, n)
	for _, k := range keys {
		var seq int64
		if err := tx.QueryRowContext(ctx, "UPDATE "+keysTable+" SET seq = seq + 1 WHERE k = $1 RETURNING seq", k).Scan(&seq); err != nil {
			_ = tx.Rollback()
			return nil, false, fmt.Errorf("advance %s: %w", k, err)
		}
		e, err := outbox.NewJSONEvent(topic, "account", k, "AccountChanged", payload{Key: k, Seq: seq})
		if err != nil {
			_ = tx.Rollback()
			return nil, false, err
		}
		e.ID = uuid.Must(uuid.NewV7())
		events = append(events, e)
	}
	if err := w.WriteTx(ctx, tx, events...); err != nil {
		_ = tx.Rollback()
		return nil, false, fmt.Errorf("write: %w", err)
	}
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID.String()
	}
	if rollback {
		if err := tx.Rollback(); err != nil {
			return ids, false, fmt.Errorf("rollback: %w", err)
		}
		return ids, false, nil
	}
	if err := tx.Commit(); err != nil {
		return ids, false, &commitError{err}
	}
	return ids, true, nil
}

// commitError is a failed COMMIT: whether the transaction committed is unknown.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// cutConnections terminates every connection whose application_name is appName, retrying for a
// few seconds until there is at least one (the relays may be reconnecting).
func cutConnections(ctx context.Context, db *sql.DB, appName string) (int, error) {
	for attempt := 0; attempt < 50; attempt++ {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()) t`, appName).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("faultinject: pg_terminate_backend: %w", err)
		}
		if n > 0 {
			return n, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, nil
}

// withAppName adds application_name to a postgres:// URL or a key=value DSN.
func withAppName(dsn, app string) string {
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "application_name=" + app
	}
	return dsn + " application_name=" + app
}

func writeRelayConfig(path string, cfg Config, dsn, table, dlq string) error {
	doc := map[string]any{
		"database": map[string]any{"dialect": "postgres", "dsn": dsn, "table": table},
		"forwarder": map[string]any{
			"batch_size": 250, "workers": 2, "max_attempts": 1000, "initial_backoff": "100ms",
			"max_backoff": "2s", "lease_ttl": "2s", "dead_letter_topic": dlq, "max_poll_interval": "500ms",
		},
		"http": map[string]any{"listen": ""},
		"log":  map[string]any{"level": "warn"},
	}
	if cfg.Broker.Kind == Pulsar {
		doc["broker"] = "pulsar"
		doc["pulsar"] = map[string]any{"url": cfg.Broker.Addr()}
	} else {
		doc["broker"] = "kafka"
		doc["kafka"] = map[string]any{"brokers": []string{cfg.Broker.Addr()}}
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// analyze fills the checks of res from the deliveries and the database.
func analyze(ctx context.Context, db *sql.DB, res *Result, out outcome, deliveries []delivery, events, effects string) error {
	res.Committed, res.RolledBack, res.Uncertain = len(out.committed), len(out.rolledBack), len(out.uncertain)
	res.Messages = len(deliveries)
	sample := func(format string, args ...any) {
		if len(res.Samples) < 5 {
			res.Samples = append(res.Samples, fmt.Sprintf(format, args...))
		}
	}
	seen := map[string]bool{}
	phantom := map[string]bool{}
	last := map[string]int64{}
	lastAt := map[string]delivery{}
	for _, d := range deliveries {
		if d.bad != "" {
			res.Undecodable++
			sample("message %q: %s", d.id, d.bad)
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
		case out.uncertain[d.id]:
			// The commit's outcome is unknown: it may legitimately have committed.
		default:
			if !phantom[d.id] {
				phantom[d.id] = true
				res.Phantoms++
				sample("phantom %s (key %s seq %d, rolled back: %v)", d.id, d.key, d.seq, out.rolledBack[d.id])
			}
			continue
		}
		if d.seq <= last[d.key] {
			res.OrderViolations++
			prev := lastAt[d.key]
			sample("key %s: seq %d (%s, %s) arrived after seq %d (%s, %s)", d.key, d.seq, d.where,
				d.at.Format("15:04:05.000"), last[d.key], prev.where, prev.at.Format("15:04:05.000"))
		}
		if d.seq > last[d.key] {
			last[d.key], lastAt[d.key] = d.seq, d
		}
	}
	for id := range out.committed {
		if !seen[id] {
			res.Lost++
			sample("lost %s", id)
		}
	}

	if err := db.QueryRowContext(ctx, "SELECT count(*) FILTER (WHERE status = 2), count(*) FILTER (WHERE status = 0) FROM "+events).
		Scan(&res.DeadLettered, &res.Pending); err != nil {
		return fmt.Errorf("faultinject: count outbox rows: %w", err)
	}
	rows, err := db.QueryContext(ctx, "SELECT event_id, count(*) FROM "+effects+" GROUP BY event_id")
	if err != nil {
		return fmt.Errorf("faultinject: read effects: %w", err)
	}
	defer rows.Close()
	effectsOf := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		effectsOf[id] = n
		res.Effects += n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for id := range out.committed {
		if effectsOf[id] != 1 {
			res.EffectViolations++
			sample("event %s has %d effects", id, effectsOf[id])
		}
	}
	for id, n := range effectsOf {
		if !out.committed[id] && !out.uncertain[id] {
			res.EffectViolations++
			sample("effect for uncommitted event %s (%d)", id, n)
		}
	}
	return nil
}
