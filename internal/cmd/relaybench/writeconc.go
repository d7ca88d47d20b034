package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// The write side under concurrency: concurrentWriters writers commit single-row business
// transactions as fast as they can, with and without one event, and the committed transactions
// per second are compared. PostgreSQL's NOTIFY serializes the commits of notifying transactions
// (a database-wide lock held until the commit is flushed) and writers of one key wait for each
// other's key lock, so a one-writer figure alone can hide what an event costs.

const (
	// concurrentWriters is the number of writers of the concurrent write-side measurement.
	concurrentWriters = 8
	// concurrentWindow is how long one setting runs in one round: short, so that the load of a
	// shared machine, which changes within seconds, weighs on every setting alike.
	concurrentWindow = 500 * time.Millisecond
	// concurrentRounds is the number of rounds; the settings take turns in a new random order
	// each round. The rate reported is the median round's, the share kept the median of the
	// rounds' shares (each round's event setting against its base setting in the same round).
	concurrentRounds = 16
	// concurrentKeep is the target: the writers keep at least this share of their committed
	// transactions per second when each transaction writes one event.
	concurrentKeep = 0.85
	// walKeep is the wal writer's target (issue 39).
	walKeep = 0.90
)

// concurrentCost is the committed transactions per second of one write-side setting under
// concurrentWriters writers (median of the rounds) and the setting it is compared with.
type concurrentCost struct {
	label  string
	rates  []float64
	median float64
	// kept is the median over the rounds of rate / the base setting's rate (0 without a base).
	kept float64
	base int
	// keep is the share the setting must keep (0: concurrentKeep; negative: no target).
	keep float64
	// role names the rows the target tables read, as writeCost.role.
	role string
}

// writeTables are the tables of a write-side measurement: a business table, and an outbox table
// per settings (polling: key locks and the notify trigger, with a relay's listener on its
// channel as a waiting polling relay has; cdc: neither). The wal writer (ModeWAL) names the cdc
// settings' table and writes no row into it.
type writeTables struct {
	business string
	polling  *outbox.Writer
	cdc      *outbox.Writer
	wal      *outbox.Writer
	// walSlot is the replication slot the wal writer checks.
	walSlot string
	close   func()
}

// newWriteTables creates the tables and starts the listener; close drops them.
func newWriteTables(ctx context.Context, db *sql.DB, d database) (*writeTables, error) {
	t := &writeTables{business: "bench_business_" + fmt.Sprint(time.Now().UnixNano()%1e9)}
	var undo []func()
	t.close = func() {
		for _, f := range slices.Backward(undo) {
			f()
		}
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+t.business+" (id BIGSERIAL PRIMARY KEY, note TEXT NOT NULL)"); err != nil {
		return nil, err
	}
	undo = append(undo, func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + t.business) })
	for _, cdc := range []bool{false, true} {
		name, _, _, err := setup(db, d, relayOutboxkit)
		if err != nil {
			t.close()
			return nil, err
		}
		undo = append(undo, func() { cleanup(db, d, relayOutboxkit, name) })
		w, err := outbox.NewWriter(outbox.Config{Dialect: d.dialect, Table: name, DisableKeyLocks: cdc})
		if err != nil {
			t.close()
			return nil, err
		}
		if !cdc {
			t.polling = w
			listenCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
			wakes := forwarder.ListenPostgres(listenCtx, d.dsn, w.Table(), nil)
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				for range wakes {
				}
			}()
			undo = append(undo, func() { stop(); <-drained })
			continue
		}
		t.cdc = w
		// The wal writer emits only while its slot exists (docs/wal.md, "The slot").
		slot := "relaybench_wal_" + strconv.FormatInt(time.Now().UnixNano()%1e12, 10)
		t.walSlot = slot
		if t.wal, err = outbox.NewWriter(outbox.Config{Dialect: d.dialect, Table: name, Mode: outbox.ModeWAL, WALSlot: slot}); err != nil {
			t.close()
			return nil, err
		}
		if _, err := outbox.CreateWALSlot(ctx, db, t.wal.Table(), slot); err != nil {
			t.close()
			return nil, err
		}
		wal := t.wal.Table()
		undo = append(undo, func() { _ = outbox.DropWALSlot(context.WithoutCancel(ctx), db, wal, slot) })
		if _, err := db.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+name+"_notify ON "+name); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

// measureConcurrentWrites runs concurrentRounds rounds of the nine settings (business row only,
// + 1 event with the polling settings, with the cdc settings, and with the wal writer; through
// database/sql and through a pgx batch; and the database/sql business row + SELECT 1), each for concurrentWindow with concurrentWriters writers on their own
// connections, and returns the committed transactions per second of each.
func measureConcurrentWrites(db *sql.DB, d database) ([]concurrentCost, error) {
	ctx := context.Background()
	tables, err := newWriteTables(ctx, db, d)
	if err != nil {
		return nil, err
	}
	defer tables.close()
	pool, err := sql.Open(d.driver, d.dsn)
	if err != nil {
		return nil, err
	}
	defer func() { _ = pool.Close() }()
	pool.SetMaxOpenConns(concurrentWriters)
	pool.SetMaxIdleConns(concurrentWriters)
	conns := make([]*pgx.Conn, concurrentWriters)
	for i := range conns {
		if conns[i], err = pgx.Connect(ctx, d.dsn); err != nil {
			return nil, fmt.Errorf("connect with pgx: %w", err)
		}
		defer func() { _ = conns[i].Close(context.WithoutCancel(ctx)) }()
	}
	const polling, cdc = "polling settings (key lock, notify trigger, a relay listening)", "cdc settings (no key lock, no trigger)"
	const wal = "wal settings (a logical decoding message, no row)"
	type setting struct {
		concurrentCost
		w     *outbox.Writer
		pgx   bool
		floor bool
	}
	settings := []setting{
		{concurrentCost: concurrentCost{label: "database/sql: business row only", base: -1}},
		{concurrentCost: concurrentCost{label: "database/sql: + 1 event (WriteTx), " + polling, base: 0}, w: tables.polling},
		{concurrentCost: concurrentCost{label: "database/sql: + 1 event (WriteTx), " + cdc, base: 0}, w: tables.cdc},
		{concurrentCost: concurrentCost{label: "pgx batch: business row only", base: -1}, pgx: true},
		{concurrentCost: concurrentCost{label: "pgx batch: + 1 event (QueuePgx), " + polling, base: 3}, w: tables.polling, pgx: true},
		{concurrentCost: concurrentCost{label: "pgx batch: + 1 event (QueuePgx), " + cdc, base: 3}, w: tables.cdc, pgx: true},
		{concurrentCost: concurrentCost{label: "database/sql: business row + SELECT 1 (the round-trip floor)", base: 0, keep: -1}, floor: true},
		{concurrentCost: concurrentCost{label: "database/sql: + 1 event (WriteTx), " + wal, base: 0, keep: walKeep, role: "wal:sql"}, w: tables.wal},
		{concurrentCost: concurrentCost{label: "pgx batch: + 1 event (QueuePgx), " + wal, base: 3, keep: walKeep, role: "wal:pgx"}, w: tables.wal, pgx: true},
	}
	insert := "INSERT INTO " + tables.business + " (note) VALUES ($1)"
	order := make([]int, len(settings))
	for i := range order {
		order[i] = i
	}
	shuffle := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var seq atomic.Int64
	for range concurrentRounds {
		shuffle.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, i := range order {
			s := &settings[i]
			write := func(writer int) error {
				ev := makeEvent("bench.write", int(seq.Add(1)), 1000, 256, false)
				switch {
				case s.pgx:
					return writePgx(ctx, conns[writer], insert, s.w, ev)
				case s.floor:
					return writeSQLFloor(ctx, pool, insert)
				}
				return writeSQL(ctx, pool, insert, s.w, ev)
			}
			rate, err := commitRate(concurrentWriters, concurrentWindow, write)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.label, err)
			}
			s.rates = append(s.rates, rate)
		}
	}
	out := make([]concurrentCost, len(settings))
	for i, s := range settings {
		out[i] = s.concurrentCost
		out[i].median = medianOf(s.rates)
		if s.base >= 0 {
			shares := make([]float64, len(s.rates))
			for r, rate := range s.rates {
				shares[r] = rate / settings[s.base].rates[r]
			}
			out[i].kept = medianOf(shares)
		}
	}
	return out, nil
}

// commitRate runs write on writers goroutines for window and returns the committed
// transactions per second.
func commitRate(writers int, window time.Duration, write func(writer int) error) (float64, error) {
	var (
		committed atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		first     error
	)
	began := time.Now()
	deadline := began.Add(window)
	for w := range writers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := write(w); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					return
				}
				committed.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(committed.Load()) / time.Since(began).Seconds(), first
}

func medianOf(values []float64) float64 {
	sorted := slices.Sorted(slices.Values(values))
	return sorted[len(sorted)/2]
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// printConcurrentTable prints the committed transactions per second of each setting and the
// share of the business row's rate it keeps, against the target.
func printConcurrentTable(w io.Writer, costs []concurrentCost) {
	if len(costs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwrite side under concurrency: %d writers on their own connections commit single-row business transactions (BEGIN, INSERT, [one 256 B event of 1,000 keys], COMMIT) for %v per setting and round, %d rounds, the settings in a new random order each round; committed transactions per second, median round (min–max); kept: median over the rounds of the share of the same round's business-row rate\n\n",
		concurrentWriters, concurrentWindow, concurrentRounds)
	fmt.Fprintf(w, "| transaction | tx/s | kept of the business row's | target ≥ %.0f %% (wal: ≥ %.0f %%) |\n", 100*concurrentKeep, 100*walKeep)
	fmt.Fprintln(w, "|---|---:|---:|---|")
	for _, c := range costs {
		kept, target := "–", "–"
		if c.base >= 0 {
			keep := concurrentKeep
			if c.keep != 0 {
				keep = c.keep
			}
			kept, target = fmt.Sprintf("%.0f %%", 100*c.kept), verdict(c.kept >= keep)
			if keep < 0 {
				target = "–"
			}
		}
		fmt.Fprintf(w, "| %s | %.0f (%.0f–%.0f) | %s | %s |\n", c.label, c.median, slices.Min(c.rates), slices.Max(c.rates), kept, target)
	}
}
