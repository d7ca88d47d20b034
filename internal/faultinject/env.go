package faultinject

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/middleware"
	"github.com/outboxkit/outboxkit/outbox"
)

// outcome of the written events.
type outcome struct {
	committed, rolledBack, uncertain map[string]bool
	committedAt                      map[string]time.Time
}

// env is one run's world: the database with its tables, the independent consumer, the
// supervised relays and the writers. newEnv builds it; close tears down what Keep does not
// keep.
type env struct {
	cfg  Config
	logf func(format string, args ...any)

	db                                  *sql.DB
	table                               outbox.Table
	name, topic                         string
	keysTable, effectsTable, inboxTable string
	workDir, bin                        string
	appName                             string // PostgreSQL application_name of the relays' connections

	rec          *recorder
	inbox        *middleware.Inbox
	stopConsumer context.CancelFunc
	consumerDone chan error
	rl           *relays
	relaysDone   bool

	writer                                   *outbox.Writer
	committedCount, aborted, writerDeadlocks atomic.Int64
	outMu                                    sync.Mutex
	out                                      outcome
	stopWrites                               atomic.Bool
	writersWG                                sync.WaitGroup
	writersLeft                              atomic.Int64
	writeErrs                                chan error
	writeStart                               time.Time
	writeDuration                            time.Duration
	stopWriterCtx                            context.CancelFunc
	cleanups                                 []func()
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

// newEnv creates the tables, starts the dedicated broker, the consumer and the relays. The
// returned env is never nil: call close even after an error.
func newEnv(ctx context.Context, cfg Config) (*env, error) {
	e := &env{cfg: cfg, writeErrs: make(chan error, cfg.Writers),
		out: outcome{committed: map[string]bool{}, rolledBack: map[string]bool{}, uncertain: map[string]bool{},
			committedAt: map[string]time.Time{}}}
	e.logf = func(format string, args ...any) { cfg.Logf(time.Now().Format("15:04:05.000 ")+format, args...) }
	if cfg.DSN == "" || cfg.Broker.RepoRoot == "" {
		return e, errors.New("faultinject: Config.DSN and Config.Broker.RepoRoot are required")
	}
	if cfg.Dialect != outbox.Postgres && cfg.Dialect != outbox.MySQL {
		return e, fmt.Errorf("faultinject: database %q: want %s or %s", cfg.Dialect, outbox.Postgres, outbox.MySQL)
	}
	e.logf("starting the dedicated %s (state %s)", cfg.Broker.Kind, cfg.Broker.StateDir)
	if err := cfg.Broker.Start(ctx); err != nil {
		return e, err
	}
	var err error
	if e.workDir, err = os.MkdirTemp("", "faultinject-"); err != nil {
		return e, err
	}
	if !cfg.Keep {
		e.defer_(func() { _ = os.RemoveAll(e.workDir) })
	} else {
		e.logf("work directory (relay configs and logs): %s", e.workDir)
	}
	if e.bin = cfg.Binary; e.bin == "" {
		e.logf("building outboxkit")
		if e.bin, err = BuildCLI(ctx, cfg.Broker.RepoRoot, e.workDir); err != nil {
			return e, err
		}
	}

	if e.db, err = sql.Open(driver(cfg.Dialect), cfg.DSN); err != nil {
		return e, fmt.Errorf("faultinject: open %s: %w", cfg.Dialect, err)
	}
	e.defer_(func() { _ = e.db.Close() })
	e.db.SetMaxOpenConns(cfg.Writers + 12)
	if err := e.db.PingContext(ctx); err != nil {
		return e, fmt.Errorf("faultinject: %s: %w", cfg.Dialect, err)
	}

	e.name = fmt.Sprintf("fault_%s_%s_%d", cfg.Dialect, cfg.Broker.Kind, time.Now().UnixNano()%1e9)
	e.topic = strings.ReplaceAll(e.name, "_", "-")
	if e.table, err = outbox.NewTable(cfg.Dialect, e.name); err != nil {
		return e, err
	}
	e.keysTable, e.effectsTable, e.inboxTable = e.name+"_keys", e.name+"_effects", e.name+"_inbox"
	if !cfg.Keep {
		e.defer_(func() {
			for _, t := range []string{e.table.Events(), e.table.Leases(), e.table.Relays(), e.table.Migrations(),
				e.table.KeyLocks(), e.table.CDCSlots(), e.keysTable, e.effectsTable, e.inboxTable} {
				_, _ = e.db.Exec("DROP TABLE IF EXISTS " + t)
			}
		})
		if cfg.Source == "cdc" {
			// Runs before the tables are dropped and after the relays stopped.
			e.defer_(func() { dropCDCSlot(e.db, e.table) })
		}
	}
	if err := outbox.Migrate(ctx, e.db, e.table); err != nil {
		return e, fmt.Errorf("faultinject: migrate: %w", err)
	}
	textType := "text"
	if cfg.Dialect == outbox.MySQL {
		textType = "VARCHAR(64)"
	}
	setup := []string{
		"CREATE TABLE " + e.keysTable + " (k " + textType + " PRIMARY KEY, seq BIGINT NOT NULL DEFAULT 0)",
		"CREATE TABLE " + e.effectsTable + " (event_id " + textType + " NOT NULL)",
	}
	for _, q := range setup {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return e, fmt.Errorf("faultinject: %s: %w", q, err)
		}
	}
	for first := 1; first <= cfg.Keys; first += 500 {
		var values []string
		var args []any
		for i := first; i < first+500 && i <= cfg.Keys; i++ {
			values = append(values, "(?)")
			args = append(args, keyName(i))
		}
		if _, err := e.db.ExecContext(ctx, e.q("INSERT INTO "+e.keysTable+" (k) VALUES "+strings.Join(values, ", ")), args...); err != nil {
			return e, fmt.Errorf("faultinject: insert keys: %w", err)
		}
	}

	// The independent consumer, with the inbox on the same database (its own pool).
	handler, inbox, err := newEffectHandler(e.db, cfg.Dialect, e.inboxTable, e.q("INSERT INTO "+e.effectsTable+" (event_id) VALUES (?)"))
	if err != nil {
		return e, err
	}
	e.inbox = inbox
	e.rec = newRecorder(4, handler)
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	e.stopConsumer = stopConsumer
	e.consumerDone = make(chan error, 1)
	go func() {
		if cfg.Broker.Kind == Pulsar {
			e.consumerDone <- consumePulsar(consumeCtx, cfg.Broker.Addr(), "persistent://public/default/"+e.topic, e.rec)
		} else {
			e.consumerDone <- consumeKafka(consumeCtx, cfg.Broker.Addr(), e.topic, e.rec)
		}
	}()
	e.defer_(stopConsumer)

	// The relays: on PostgreSQL their connections carry an application_name of their own, so
	// the database cut terminates theirs only (on MariaDB they are told apart by their ports).
	e.appName = "outboxkit-fault-relay-" + e.name
	dsn := cfg.DSN
	if cfg.Dialect == outbox.Postgres {
		dsn = withAppName(dsn, e.appName)
	}
	writeConfig := func(path, relayID string) error {
		return writeRelayConfig(path, cfg, dsn, e.table.Events(), e.topic+"-dlq", relayID)
	}
	e.logf("starting %d relays (%s) on %s, configs and logs in %s", cfg.Relays, e.bin, cfg.Dialect, e.workDir)
	e.rl = startRelays(e.bin, e.workDir, cfg.Relays, cfg.Seed, writeConfig)
	e.defer_(func() {
		if !e.relaysDone {
			e.rl.stop(10 * time.Second)
		}
	})

	if e.writer, err = outbox.NewWriter(outbox.Config{Dialect: cfg.Dialect, Table: e.name}); err != nil {
		return e, err
	}
	return e, nil
}

func keyName(i int) string { return fmt.Sprintf("key-%05d", i) }

// startWriters starts cfg.Writers writer goroutines; they stop after cfg.Events committed
// events, at stopWriting, or when a writer gives up.
func (e *env) startWriters() {
	cfg := e.cfg
	writeCtx, stop := context.WithCancel(context.Background())
	e.stopWriterCtx = stop
	e.defer_(stop)
	e.writeStart = time.Now()
	e.writersLeft.Store(int64(cfg.Writers))
	for w := range cfg.Writers {
		wrng := rand.New(rand.NewPCG(cfg.Seed, uint64(100+w)))
		e.writersWG.Add(1)
		go func() {
			defer e.writersWG.Done()
			defer e.writersLeft.Add(-1)
			consecutive := 0
			for writeCtx.Err() == nil && !e.stopWrites.Load() && e.committedCount.Load() < int64(cfg.Events) {
				if cfg.Rate > 0 {
					due := e.writeStart.Add(time.Duration(float64(e.committedCount.Load()) / float64(cfg.Rate) * float64(time.Second)))
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				}
				ids, ok, err := e.writeTx(writeCtx, wrng, wrng.Float64() < cfg.RollbackShare)
				now := time.Now()
				var commitErr *commitError
				failedBeforeCommit := err != nil && !errors.As(err, &commitErr)
				if err != nil && isLockTrouble(err.Error()) {
					e.writerDeadlocks.Add(1)
				}
				if failedBeforeCommit {
					// Nothing committed (the connection may have been cut by another test
					// sharing the database): its events count as rolled back.
					if writeCtx.Err() != nil {
						return
					}
					e.aborted.Add(1)
					if consecutive++; consecutive > 50 {
						e.writeErrs <- err
						return
					}
					time.Sleep(50 * time.Millisecond)
				} else {
					consecutive = 0
				}
				e.outMu.Lock()
				for _, id := range ids {
					switch {
					case failedBeforeCommit:
						e.out.rolledBack[id] = true
					case err != nil:
						e.out.uncertain[id] = true
					case ok:
						e.out.committed[id] = true
						e.out.committedAt[id] = now
					default:
						e.out.rolledBack[id] = true
					}
				}
				e.outMu.Unlock()
				if err == nil && ok {
					e.committedCount.Add(int64(len(ids)))
				}
			}
		}()
	}
}

// writersDone reports whether every writer has stopped.
func (e *env) writersDone() bool { return e.writersLeft.Load() == 0 }

// waitWriters waits for the writers and returns the error of a writer that gave up.
func (e *env) waitWriters() error {
	e.writersWG.Wait()
	e.writeDuration = time.Since(e.writeStart)
	select {
	case err := <-e.writeErrs:
		return fmt.Errorf("faultinject: writer: %w", err)
	default:
		return nil
	}
}

// finish waits until every committed event was delivered (or the drain timeout), stops the
// relays cleanly, lets late duplicates arrive, scans the relays' logs and fills the checks of res.
func (e *env) finish(ctx context.Context, res *Result) error {
	deadline := time.Now().Add(e.cfg.DrainTimeout)
	for time.Now().Before(deadline) && e.rec.missing(e.out.committed) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	e.rl.stop(20 * time.Second)
	e.relaysDone = true
	for e.rec.idleFor() < 2*time.Second && time.Now().Before(deadline.Add(10*time.Second)) {
		time.Sleep(200 * time.Millisecond)
	}
	e.stopConsumer()
	if err := <-e.consumerDone; err != nil {
		return err
	}
	if err := e.rec.closeInbox(); err != nil {
		return err
	}
	res.Kills, res.RelaySelfExits, _, _ = e.rl.counts()
	res.WriterAborts = int(e.aborted.Load())
	res.WriterDeadlocks = int(e.writerDeadlocks.Load())
	res.InboxDuplicates = e.inbox.Stats().Duplicates
	n, samples, err := scanLockTrouble(e.rl.logPaths())
	if err != nil {
		return fmt.Errorf("faultinject: scan relay logs: %w", err)
	}
	res.DeadlocksLogged, res.DeadlockSamples = n, samples
	return e.analyze(ctx, res)
}

// writeTx commits (or, when rollback, rolls back) one transaction that advances 1-3 keys'
// counters and writes one event per key carrying the key's new sequence number. The counter
// row lock serializes transactions of one key, so sequence order is commit order, and a rolled
// back transaction leaves no gap among the committed numbers. It returns the event ids, whether
// they committed, and an error when the outcome is unknown or nothing was written.
func (e *env) writeTx(ctx context.Context, rng *rand.Rand, rollback bool) ([]string, bool, error) {
	n := 1 + rng.IntN(3)
	keys := make([]string, 0, n)
	for len(keys) < n {
		k := keyName(1 + rng.IntN(e.cfg.Keys))
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // one lock order for every transaction: no deadlocks among writers
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	events := make([]outbox.Event, 0, n)
	for _, k := range keys {
		seq, err := e.advance(ctx, tx, k)
		if err != nil {
			_ = tx.Rollback()
			return nil, false, fmt.Errorf("advance %s: %w", k, err)
		}
		ev, err := outbox.NewJSONEvent(e.topic, "account", k, "AccountChanged", payload{Key: k, Seq: seq})
		if err != nil {
			_ = tx.Rollback()
			return nil, false, err
		}
		ev.ID = uuid.Must(uuid.NewV7())
		events = append(events, ev)
	}
	if err := e.writer.WriteTx(ctx, tx, events...); err != nil {
		_ = tx.Rollback()
		return nil, false, fmt.Errorf("write: %w", err)
	}
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.ID.String()
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

// advance increments key k's counter in tx and returns the new value.
func (e *env) advance(ctx context.Context, tx *sql.Tx, k string) (int64, error) {
	if e.cfg.Dialect == outbox.Postgres {
		var seq int64
		err := tx.QueryRowContext(ctx, "UPDATE "+e.keysTable+" SET seq = seq + 1 WHERE k = $1 RETURNING seq", k).Scan(&seq)
		return seq, err
	}
	// MariaDB has no UPDATE ... RETURNING: LAST_INSERT_ID(expr) hands the new value back.
	r, err := tx.ExecContext(ctx, "UPDATE "+e.keysTable+" SET seq = LAST_INSERT_ID(seq + 1) WHERE k = ?", k)
	if err != nil {
		return 0, err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return 0, fmt.Errorf("%d rows updated (%v)", n, err)
	}
	return r.LastInsertId()
}

// commitError is a failed COMMIT: whether the transaction committed is unknown.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// cutRelayConnections terminates the relays' database connections.
func (e *env) cutRelayConnections(ctx context.Context) (int, error) {
	if e.cfg.Dialect == outbox.Postgres {
		return cutConnections(ctx, e.db, e.appName)
	}
	for attempt := 0; attempt < 50; attempt++ {
		conns, err := e.connections(ctx, e.rl.pids())
		if err != nil {
			return 0, err
		}
		n := 0
		for _, c := range conns {
			// The id is an integer read from the server, not input.
			if _, err := e.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(c.id, 10)); err == nil {
				n++
			}
		}
		if n > 0 {
			return n, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, nil
}

// cutConnections terminates every PostgreSQL connection whose application_name is appName,
// retrying for a few seconds until there is at least one (the relays may be reconnecting).
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

// conn is one database connection of a relay, as the server sees it.
type conn struct {
	id    int64  // PostgreSQL backend pid or MariaDB connection id
	state string // PostgreSQL state; MariaDB COMMAND
	inTx  bool
}

// connections lists the database connections of the processes pids, told apart by their
// client ports.
func (e *env) connections(ctx context.Context, pids []int) ([]conn, error) {
	ports, err := localPorts(pids)
	if err != nil || len(ports) == 0 {
		return nil, err
	}
	var query string
	if e.cfg.Dialect == outbox.Postgres {
		query = `SELECT pid, coalesce(state, ''), coalesce(state IN ('idle in transaction', 'idle in transaction (aborted)'), false),
			coalesce(client_port, 0) FROM pg_stat_activity WHERE pid <> pg_backend_pid()`
	} else {
		query = `SELECT p.ID, p.COMMAND, EXISTS (SELECT 1 FROM information_schema.INNODB_TRX t WHERE t.trx_mysql_thread_id = p.ID),
			SUBSTRING_INDEX(p.HOST, ':', -1) FROM information_schema.PROCESSLIST p WHERE p.ID <> CONNECTION_ID() AND p.HOST LIKE '%:%'`
	}
	rows, err := e.db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("faultinject: list connections: %w", err)
	}
	defer rows.Close()
	var out []conn
	for rows.Next() {
		var c conn
		var port string
		if err := rows.Scan(&c.id, &c.state, &c.inTx, &port); err != nil {
			return nil, err
		}
		if p, err := strconv.Atoi(port); err == nil && ports[p] {
			out = append(out, c)
		}
	}
	return out, rows.Err()
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

func writeRelayConfig(path string, cfg Config, dsn, table, dlq, relayID string) error {
	doc := map[string]any{
		"database": map[string]any{"dialect": string(cfg.Dialect), "dsn": dsn, "table": table},
		"forwarder": map[string]any{
			"batch_size": 250, "workers": 2, "max_attempts": 1000, "initial_backoff": "100ms",
			"max_backoff": "2s", "lease_ttl": cfg.LeaseTTL.String(), "dead_letter_topic": dlq,
			"max_poll_interval": "500ms", "relay_id": relayID,
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
	if cfg.Source != "" {
		doc["forwarder"].(map[string]any)["source"] = cfg.Source
	}
	if cfg.Delivery != "" {
		fwd := doc["forwarder"].(map[string]any)
		fwd["delivery"] = cfg.Delivery
		fwd["checkpoint_topic"] = "faultinject.checkpoints" // shared by the runs; each run's units have their own prefix
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// analyze fills the checks of res from the deliveries and the database.
func (e *env) analyze(ctx context.Context, res *Result) error {
	out, deliveries := e.out, e.rec.deliveries
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

	if err := e.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(CASE WHEN status = 2 THEN 1 ELSE 0 END), 0), "+
		"COALESCE(SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), 0) FROM "+e.table.Events()).
		Scan(&res.DeadLettered, &res.Pending); err != nil {
		return fmt.Errorf("faultinject: count outbox rows: %w", err)
	}
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
