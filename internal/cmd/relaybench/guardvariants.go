package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxkit/outboxkit/outbox"
)

// guardVariant is another way of guarding the wal writer's emit by its slot (issue 39: what the
// slot guard costs), measured beside the writer's own statement and the bare emit when
// -guard-variants is given. query is the statement, with {prefix}, {slot}, {guard} (the table's
// <table>_wal_guard) and {refuse} (<table>_wal_refuse) replaced; rowCheck: the statement
// returns no row instead of failing when the slot is not usable, so the writer checks that a
// row came back.
type guardVariant struct {
	name, query string
	rowCheck    bool
}

// guardVariants are the statements measured. "srf floor" is no guard: it runs the cheapest
// set-returning function in the same place, the floor of any check that reads the slots
// through one.
var guardVariants = []guardVariant{
	{name: "slots in FROM, row checked by the writer", rowCheck: true,
		query: "SELECT pg_logical_emit_message(true, '{prefix}', $1::bytea) FROM pg_catalog.pg_get_replication_slots() AS s WHERE s.slot_name = '{slot}' AND s.datoid IS NOT NULL AND s.wal_status IS DISTINCT FROM 'lost'"},
	{name: "pg_replication_slots view in FROM, LIMIT 1, row checked by the writer", rowCheck: true,
		query: "SELECT pg_logical_emit_message(true, '{prefix}', $1::bytea) FROM pg_catalog.pg_replication_slots AS s WHERE s.slot_name = '{slot}' AND s.database = current_database() AND s.wal_status IS DISTINCT FROM 'lost' LIMIT 1"},
	{name: "every registered slot (<table>_wal_guard(), a SQL function inlined in FROM)",
		query: "SELECT CASE WHEN g.ok THEN pg_logical_emit_message(true, '{prefix}', $1::bytea) ELSE {refuse}(g.bad) END FROM {guard}() AS g"},
	{name: "the writer's check in a SQL-language function (bench_emit(slot, envelope))",
		query: "SELECT {table}_bench_emit('{slot}', $1::bytea)"},
	{name: "srf floor: generate_series(1, 1) in place of the slots (no guard)",
		query: "SELECT CASE WHEN EXISTS (SELECT 1 FROM generate_series(1, 1)) THEN pg_logical_emit_message(true, '{prefix}', $1::bytea) END"},
}

// createBenchEmit creates the SQL-language function of the "bench_emit" variant for table; the
// returned function drops it.
func createBenchEmit(ctx context.Context, db *sql.DB, table outbox.Table) (func(), error) {
	fn := table.Events() + "_bench_emit"
	q := "CREATE FUNCTION " + fn + "(slot TEXT, envelope BYTEA) RETURNS PG_LSN LANGUAGE sql VOLATILE AS $$ " +
		"SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_get_replication_slots() AS s WHERE s.slot_name = slot " +
		"AND s.datoid IS NOT NULL AND s.wal_status IS DISTINCT FROM 'lost') THEN pg_logical_emit_message(true, '" +
		table.WALPrefix() + "', envelope) ELSE " + table.Events() + "_wal_refuse(slot) END $$"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return nil, fmt.Errorf("create %s: %w", fn, err)
	}
	return func() { _, _ = db.Exec("DROP FUNCTION IF EXISTS " + fn + "(TEXT, BYTEA)") }, nil
}

// statement returns v's statement for the wal writer's table and slot.
func (v guardVariant) statement(table outbox.Table, slot string) string {
	return strings.NewReplacer("{prefix}", table.WALPrefix(), "{slot}", slot, "{table}", table.Events(),
		"{guard}", table.Events()+"_wal_guard", "{refuse}", table.Events()+"_wal_refuse").Replace(v.query)
}

// guardVariantSettings returns the write settings of the variants, each through database/sql and
// through a pgx batch, with the rows their overhead is taken over (baseSQL: the database/sql
// business row + SELECT 1, basePgx: the pgx business row; indexes in the settings); the table's
// guard lines compare each with the bare emit written the same way.
func guardVariantSettings(w *outbox.Writer, slot string, baseSQL, basePgx int) []writeSetting {
	var out []writeSetting
	for _, v := range guardVariants {
		q := v.statement(w.Table(), slot)
		out = append(out,
			writeSetting{writeCost: writeCost{label: "database/sql: + 1 emit guarded by " + v.name + "; overhead over the SELECT 1 row", base: baseSQL, vsSettings: -1, guard: "variant:database/sql"}, w: w, emitQuery: q, rowCheck: v.rowCheck},
			writeSetting{writeCost: writeCost{label: "pgx batch: + 1 emit guarded by " + v.name, base: basePgx, vsSettings: -1, guard: "variant:pgx batch"}, w: w, pgx: true, emitQuery: q, rowCheck: v.rowCheck})
	}
	return out
}

// writeEmitQuery runs BEGIN, the business INSERT, emit (a statement of ev's envelope, $1, with
// w's prefix), COMMIT: in one pgx batch on conn, or through database/sql on db when conn is
// nil. With rowCheck, a statement that returns no row fails the transaction.
func writeEmitQuery(ctx context.Context, db *sql.DB, conn *pgx.Conn, insert, emit string, rowCheck bool, ev outbox.Event) error {
	ev.CreatedAt = time.Now()
	env, err := outbox.AppendWALEnvelope(nil, []outbox.Event{ev})
	if err != nil {
		return err
	}
	noRow := func(n int64) error {
		if rowCheck && n != 1 {
			return fmt.Errorf("guarded emit returned %d rows: the slot is not usable", n)
		}
		return nil
	}
	if conn == nil {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, insert, "order"); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, emit, env)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if err := noRow(n); err != nil {
			return err
		}
		return tx.Commit()
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	batch := &pgx.Batch{}
	batch.Queue(insert, "order")
	batch.Queue(emit, env).Exec(func(ct pgconn.CommandTag) error { return noRow(ct.RowsAffected()) })
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
