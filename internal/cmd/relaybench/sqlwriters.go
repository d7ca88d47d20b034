package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxkit/outboxkit/outbox"
)

// relaySQLWriters is the outboxkit forwarder (polling, at least once) draining a backlog that
// plain-SQL writers filled (docs/writers.md): one single-row INSERT per event, key_hash left to
// the table's trigger, instead of outbox.Writer's multi-row INSERT.
const relaySQLWriters = "outboxkit-sql"

// plainInsert returns the single-row INSERT a writer in any language sends into table.
func plainInsert(d database, table string) string {
	cols := " (event_id, topic, aggregate_type, aggregate_id, event_type, payload, headers) VALUES "
	if d.dialect == outbox.MySQL {
		return "INSERT INTO " + table + cols + "(?, ?, ?, ?, ?, ?, ?)"
	}
	return "INSERT INTO " + table + cols + "($1, $2, $3, $4, $5, $6, $7)"
}

// insertPlain inserts events in tx by plainInsert, one statement per event.
func insertPlain(ctx context.Context, tx *sql.Tx, insert string, events []outbox.Event) error {
	for _, e := range events {
		headers, err := json.Marshal(e.Headers)
		if err != nil || e.Headers == nil {
			headers = []byte("{}")
		}
		if _, err := tx.ExecContext(ctx, insert, e.ID.String(), e.Topic, e.AggregateType, e.AggregateID, e.EventType,
			e.Payload, string(headers)); err != nil {
			return fmt.Errorf("plain INSERT of event %s: %w", e.ID, err)
		}
	}
	return nil
}

// plainWriteFunc is setup's writeFunc for relaySQLWriters: events in one transaction by plain
// INSERTs, retried when the database aborts it as a deadlock, as an application would. The
// key locks are database-wide (PostgreSQL advisory locks, not per table): a transaction taking
// several keys' locks in row order can deadlock with any other writer of those keys in the same
// database, outbox.Writer (which takes them in its own sorted order) included (docs/writers.md).
func plainWriteFunc(db *sql.DB, d database, table string) writeFunc {
	insert := plainInsert(d, table)
	return func(ctx context.Context, events []outbox.Event) error {
		var err error
		for range maxDeadlockRetries {
			if err = writePlainTx(ctx, db, insert, events); err == nil || !isDeadlock(err) {
				return err
			}
		}
		return fmt.Errorf("%d deadlocks in a row: %w", maxDeadlockRetries, err)
	}
}

const maxDeadlockRetries = 5

func writePlainTx(ctx context.Context, db *sql.DB, insert string, events []outbox.Event) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := insertPlain(ctx, tx, insert, events); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// isDeadlock reports a transaction the database aborted as a deadlock: PostgreSQL SQLSTATE
// 40P01, MySQL error 1213.
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40P01"
	}
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == 1213
}

// sqlWriteCost is the median duration of one transaction of a given number of events (over as
// many keys), written by outbox.Writer and by plain INSERTs, on one database.
type sqlWriteCost struct {
	db         string
	events     int
	goW, plain time.Duration
}

// measureSQLWriteCost times transactions of 1 and of 10 events (256 B payloads, 10 keys) into
// one outbox table, n of each per writer; outbox.Writer and the plain INSERTs take turns one
// transaction at a time in a random order, so the load of a shared machine weighs on both alike.
func measureSQLWriteCost(db *sql.DB, d database, n int) ([]sqlWriteCost, error) {
	ctx := context.Background()
	name, topic, goWrite, err := setup(db, d, relayOutboxkit)
	if err != nil {
		return nil, err
	}
	defer cleanup(db, d, relayOutboxkit, name)
	plainWrite := plainWriteFunc(db, d, name)
	var out []sqlWriteCost
	for _, size := range []int{1, 10} {
		var goTimes, plainTimes []time.Duration
		for i := range n {
			events := make([]outbox.Event, size)
			for j := range events {
				events[j] = makeEvent(topic, i*size+j, 10, 256, false)
			}
			order := []bool{false, true}
			if rand.IntN(2) == 0 {
				order = []bool{true, false}
			}
			for _, plain := range order {
				write, times := goWrite, &goTimes
				if plain {
					write, times = plainWrite, &plainTimes
				}
				for j := range events {
					events[j].ID = uuid.Must(uuid.NewV7())
				}
				began := time.Now()
				if err := write(ctx, events); err != nil {
					return nil, fmt.Errorf("%d-event transaction (plain SQL %v): %w", size, plain, err)
				}
				*times = append(*times, time.Since(began))
			}
		}
		out = append(out, sqlWriteCost{db: d.label, events: size, goW: medianDuration(goTimes), plain: medianDuration(plainTimes)})
		if _, err := db.ExecContext(ctx, "DELETE FROM "+name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// printSQLWriteTable prints the write cost per event of outbox.Writer and of plain SQL.
func printSQLWriteTable(w io.Writer, costs []sqlWriteCost, n int) {
	if len(costs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwrite side, plain SQL beside outbox.Writer: one transaction of 1 or 10 events (256 B, 10 keys) into the outbox table, no business row; the two writers interleaved one transaction at a time in a random order, %d transactions each, median\n\n", n)
	fmt.Fprintln(w, "| database | events per transaction | outbox.Writer | plain SQL (one INSERT per event) | plain SQL / outbox.Writer | per event, outbox.Writer → plain SQL |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, c := range costs {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s → %s |\n", c.db, c.events, c.goW.Round(time.Microsecond), c.plain.Round(time.Microsecond),
			ratio(float64(c.plain), float64(c.goW)), (c.goW / time.Duration(c.events)).Round(time.Microsecond),
			(c.plain / time.Duration(c.events)).Round(time.Microsecond))
	}
}
