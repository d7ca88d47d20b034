package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The scheduled-events run (-only scheduled, docs/scheduled.md), on each database, with the
// outboxkit polling relay child and the real Kafka, -repeat times with the cases interleaved:
//
//   - due: o.events ordinary events committed in one transaction into the idle relay, timed from
//     the commit to the last one consumed, on a table that holds 0 (beside0) or o.future
//     (besideFuture) events scheduled for tomorrow: the scheduled rows must not slow the claim.
//   - burst: o.events events scheduled for later, all made due in one transaction
//     (Writer.Reschedule to now) while the relay idles, timed from that commit to the last one
//     consumed: they come due at the same instant and must drain as the ordinary backlog.
//   - lateness: o.rate scheduled events per second for o.seconds, each due 2 s after its write,
//     from consumer receive time minus deliver_at: p50 and p99 (and the events that arrived
//     before their time, which must be none).

// onlyScheduled is the value of -only that runs the scheduled-events table alone.
const onlyScheduled = "scheduled"

// scheduleAhead is how far ahead of its write each event of the lateness case is due.
const scheduleAhead = 2 * time.Second

// schedRep is one repetition's figures on one database.
type schedRep struct {
	beside0, besideFuture, burst float64 // events/s
	p50, p99                     time.Duration
	early, lateEvents            int
	// The lateness case through the cdc source (-source cdc, PostgreSQL); cdcEvents 0 when not run.
	cdcP50, cdcP99      time.Duration
	cdcEarly, cdcEvents int
}

// runScheduled measures and prints the scheduled-events table (-only scheduled).
func runScheduled(conns connections, o options, noise *noise, began time.Time) error {
	for _, d := range o.dbs {
		db := conns.get(d.name)
		future, err := newSchedTable(db, d)
		if err != nil {
			return err
		}
		defer future.drop(db, d)
		fmt.Printf("filling %d events scheduled for tomorrow into %s on %s ...\n", o.future, future.name, d.label)
		took, err := fillFuture(db, d, future.name, o.future)
		if err != nil {
			return err
		}
		fmt.Printf("filled in %s\n", took.Round(time.Millisecond))
		var reps []schedRep
		for rep := 1; rep <= o.repeat; rep++ {
			noise.sample()
			r, err := scheduledRep(db, d, o, future)
			if err != nil {
				return fmt.Errorf("%s, repetition %d: %w", d.label, rep, err)
			}
			fmt.Printf("[%d/%d] %s load average %s: due beside 0 %.0f/s, beside %d %.0f/s, burst %.0f/s, lateness p50 %s p99 %s (%d events, %d early)\n",
				rep, o.repeat, d.label, loadavg(), r.beside0, o.future, r.besideFuture, r.burst, r.p50, r.p99, r.lateEvents, r.early)
			if r.cdcEvents > 0 {
				fmt.Printf("[%d/%d] %s cdc source: lateness p50 %s p99 %s (%d events, %d early)\n", rep, o.repeat, d.label, r.cdcP50, r.cdcP99, r.cdcEvents, r.cdcEarly)
			}
			reps = append(reps, r)
		}
		printSchedTable(os.Stdout, d.label, o, reps)
	}
	noise.sample()
	noise.finish(time.Since(began))
	noise.printMachine(os.Stdout)
	fmt.Println("\ncommand:", o.command)
	return nil
}

// scheduledRep runs one repetition of every case, in a fixed order.
func scheduledRep(db *sql.DB, d database, o options, future schedTable) (schedRep, error) {
	var r schedRep
	var err error
	empty, err := newSchedTable(db, d)
	if err != nil {
		return r, err
	}
	defer empty.drop(db, d)
	if r.beside0, err = dueDrain(db, d, o, empty, false); err != nil {
		return r, fmt.Errorf("due beside 0: %w", err)
	}
	if r.besideFuture, err = dueDrain(db, d, o, future, false); err != nil {
		return r, fmt.Errorf("due beside %d: %w", o.future, err)
	}
	if r.burst, err = dueDrain(db, d, o, empty, true); err != nil {
		return r, fmt.Errorf("burst: %w", err)
	}
	lat, err := lateness(relayOutboxkit, db, d, o, empty)
	if err != nil {
		return r, fmt.Errorf("lateness: %w", err)
	}
	r.lateEvents, r.early, r.p50, r.p99 = summarizeLateness(lat)
	if contains(o.relays, relayCDC) && d.dialect == outbox.Postgres {
		if lat, err = cdcLateness(db, d, o); err != nil {
			return r, fmt.Errorf("lateness through the cdc source: %w", err)
		}
		r.cdcEvents, r.cdcEarly, r.cdcP50, r.cdcP99 = summarizeLateness(lat)
	}
	return r, nil
}

// summarizeLateness returns the number of events, those that arrived early, the p50 and the p99.
func summarizeLateness(lat []time.Duration) (n, early int, p50, p99 time.Duration) {
	for _, l := range lat {
		if l < 0 {
			early++
		}
	}
	slices.Sort(lat)
	return len(lat), early, lat[len(lat)/2], lat[len(lat)*99/100]
}

// cdcLateness runs the lateness case with the outboxkit relay child on the cdc source, on a
// table of its own set up for it (its slot dropped at the end).
func cdcLateness(db *sql.DB, d database, o options) ([]time.Duration, error) {
	t, err := newSchedTable(db, d)
	if err != nil {
		return nil, err
	}
	defer cleanup(db, d, relayCDC, t.name)
	if err := cdcSettings(context.Background(), db, t.w.Table()); err != nil {
		return nil, fmt.Errorf("cdc settings of %s: %w", t.name, err)
	}
	return lateness(relayCDC, db, d, o, t)
}

// schedTable is an outbox table of the run and its writer.
type schedTable struct {
	name string
	w    *outbox.Writer
}

func newSchedTable(db *sql.DB, d database) (schedTable, error) {
	name := testsupport.UniqueName("bench_sched")
	w, err := outbox.NewWriter(outbox.Config{Dialect: d.dialect, Table: name})
	if err != nil {
		return schedTable{}, fmt.Errorf("outbox writer: %w", err)
	}
	if err := outbox.Migrate(context.Background(), db, w.Table()); err != nil {
		cleanup(db, d, relayOutboxkit, name)
		return schedTable{}, fmt.Errorf("migrate outbox table %s: %w", name, err)
	}
	return schedTable{name: name, w: w}, nil
}

func (t schedTable) drop(db *sql.DB, d database) { cleanup(db, d, relayOutboxkit, t.name) }

// fillFuture inserts n events scheduled for tomorrow in one statement of the database (a
// series), key hashes given so the any-writer trigger does not run, then analyzes the table.
func fillFuture(db *sql.DB, d database, table string, n int) (time.Duration, error) {
	began := time.Now()
	q := "INSERT INTO " + table + " (event_id, topic, aggregate_id, event_type, payload, headers, key_hash, partition_no, created_at, status, deliver_at)" +
		" SELECT gen_random_uuid(), 'future', 'f' || g, 'E', '\\x00'::bytea, '{}', g, g % 64, now(), 4, now() + interval '1 day' FROM generate_series(1, " + strconv.Itoa(n) + ") g"
	analyze := "ANALYZE " + table
	if d.dialect == outbox.MySQL {
		q = "INSERT INTO " + table + " (event_id, topic, aggregate_id, event_type, payload, headers, key_hash, partition_no, created_at, status, deliver_at)" +
			" SELECT UUID(), 'future', CONCAT('f', seq), 'E', 'x', '{}', seq, seq % 64, UTC_TIMESTAMP(6), 4, UTC_TIMESTAMP(6) + INTERVAL 1 DAY FROM seq_1_to_" + strconv.Itoa(n)
		analyze = "ANALYZE TABLE " + table
	}
	if n > 0 {
		if _, err := db.Exec(q); err != nil {
			return 0, fmt.Errorf("fill %d scheduled events into %s: %w", n, table, err)
		}
	}
	if _, err := db.Exec(analyze); err != nil {
		return 0, fmt.Errorf("analyze %s: %w", table, err)
	}
	return time.Since(began), nil
}

// relayOn starts the outboxkit relay child on table t with a consumer of a new topic, and
// returns once a probe event went through (the relay is up and idle).
func relayOn(d database, o options, t schedTable, db *sql.DB) (topic string, src source, c *child, err error) {
	return relayOnWith(relayOutboxkit, d, o, t, db)
}

// relayOnWith is relayOn with the relay child relay (outboxkit, or outboxkit-cdc).
func relayOnWith(relay string, d database, o options, t schedTable, db *sql.DB) (topic string, src source, c *child, err error) {
	topic = testsupport.UniqueName("bench_sched_events")
	if err := createTopic(o.brokers, topic); err != nil {
		return "", nil, nil, err
	}
	if src, err = newSource(relay, o, topic); err != nil {
		return "", nil, nil, err
	}
	if c, err = startChild(relay, d, t.name, o); err != nil {
		src.close()
		return "", nil, nil, err
	}
	probe := makeEvent(topic, 0, 1, 64, false)
	if err = writeTx(db, t.w, []outbox.Event{probe}, nil); err == nil {
		ctx, cancel := c.watch(2 * time.Minute)
		_, _, err = consumeN(ctx, src, 1, false)
		cancel()
	}
	if err != nil {
		_, _, _ = c.stop()
		src.close()
		return "", nil, nil, fmt.Errorf("probe event: %w", err)
	}
	return topic, src, c, nil
}

// writeTx writes events in one transaction; then, if set, runs then in it before the commit.
func writeTx(db *sql.DB, w *outbox.Writer, events []outbox.Event, then func(*sql.Tx) error) error {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if len(events) > 0 {
		if err := w.WriteTx(ctx, tx, events...); err != nil {
			return err
		}
	}
	if then != nil {
		if err := then(tx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// dueDrain times o.events due events from their commit to the last one consumed: ordinary
// events, or (burst) events written scheduled for an hour later before the relay starts and made
// due all at once by one Reschedule.
func dueDrain(db *sql.DB, d database, o options, t schedTable, burst bool) (float64, error) {
	const keys = 1000
	var ids []uuid.UUID
	var events []outbox.Event
	topic := ""
	if burst {
		topic = testsupport.UniqueName("bench_sched_burst")
		for i := range o.events {
			e := makeEvent(topic, i, keys, 256, false)
			e.DeliverAt = time.Now().Add(time.Hour)
			events = append(events, e)
			ids = append(ids, e.ID)
		}
		if err := writeTx(db, t.w, events, nil); err != nil {
			return 0, fmt.Errorf("write the scheduled burst: %w", err)
		}
	}
	relayTopic, src, c, err := relayOn(d, o, t, db)
	if err != nil {
		return 0, err
	}
	defer src.close()
	if burst {
		// The burst's events name their own topic: consume that one instead.
		src.close()
		if err := createTopic(o.brokers, topic); err != nil {
			return 0, errors.Join(err, stopChild(c))
		}
		if src, err = newSource(relayOutboxkit, o, topic); err != nil {
			return 0, errors.Join(err, stopChild(c))
		}
	}
	began := time.Now()
	if burst {
		err = writeTx(db, t.w, nil, func(tx *sql.Tx) error {
			res, err := t.w.Reschedule(context.Background(), wsql.TxFromStdSQL(tx), time.Time{}, ids...)
			if err == nil && len(res.Changed) != len(ids) {
				err = fmt.Errorf("rescheduled %d of %d events", len(res.Changed), len(ids))
			}
			return err
		})
	} else {
		for i := range o.events {
			events = append(events, makeEvent(relayTopic, i, keys, 256, false))
		}
		began = time.Now()
		err = writeTx(db, t.w, events, nil)
	}
	if err != nil {
		return 0, errors.Join(err, stopChild(c))
	}
	ctx, cancel := c.watch(10 * time.Minute)
	got, _, err := consumeN(ctx, src, o.events, false)
	elapsed := time.Since(began)
	cancel()
	if err := errors.Join(err, stopChild(c)); err != nil {
		return 0, err
	}
	return float64(got) / elapsed.Seconds(), nil
}

func stopChild(c *child) error {
	_, _, err := c.stop()
	return err
}

// lateness writes o.rate events per second for o.seconds, in transactions every 20 ms, each
// due scheduleAhead after its write, and returns each one's receive time minus its deliver_at
// (stamped into its payload's first 8 bytes).
func lateness(relay string, db *sql.DB, d database, o options, t schedTable) ([]time.Duration, error) {
	topic, src, c, err := relayOnWith(relay, d, o, t, db)
	if err != nil {
		return nil, err
	}
	defer src.close()
	total := o.rate * o.seconds
	type consumed struct {
		lat []time.Duration
		err error
	}
	done := make(chan consumed, 1)
	ctx, cancel := c.watch(time.Duration(o.seconds)*time.Second + 5*time.Minute)
	defer cancel()
	go func() {
		_, lat, err := consumeN(ctx, src, total, true)
		done <- consumed{lat, err}
	}()
	const tick = 20 * time.Millisecond
	perTick := max(1, o.rate*int(tick)/int(time.Second))
	next := time.Now()
	for i := 0; i < total; i += perTick {
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		next = next.Add(tick)
		events := make([]outbox.Event, 0, perTick)
		for j := i; j < min(i+perTick, total); j++ {
			e := makeEvent(topic, j, 1000, 256, false)
			e.DeliverAt = time.Now().Add(scheduleAhead)
			binary.BigEndian.PutUint64(e.Payload, uint64(e.DeliverAt.UnixNano()))
			events = append(events, e)
		}
		if err := writeRetryingDeadlocks(func() error { return writeTx(db, t.w, events, nil) }); err != nil {
			cancel()
			<-done
			return nil, errors.Join(fmt.Errorf("write scheduled events: %w", err), stopChild(c))
		}
	}
	res := <-done
	if err := errors.Join(res.err, stopChild(c)); err != nil {
		return nil, err
	}
	return res.lat, nil
}
