package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/outbox"
)

// The cdc relay (-source cdc): the outboxkit forwarder with Source cdc. Its drain measures the
// stream, not the table drain of a fresh slot: the slot is created (and marked drained) before
// the backlog is written, as for a relay that was down while the backlog built up. On the same
// rows, pg_recvlogical decodes a copy of the slot: the ceiling of one slot.

// relayCDC is the outboxkit forwarder with Source cdc; relayCDCExactlyOnce the same with
// Delivery exactly_once (-source cdc -delivery exactly_once).
const (
	relayCDC            = "outboxkit-cdc"
	relayCDCExactlyOnce = "outboxkit-cdc-eo"
)

// isCDC reports whether relay streams the table (the cdc source's settings and slot).
func isCDC(relay string) bool {
	relay, _ = baseOf(relay)
	return relay == relayCDC || relay == relayCDCExactlyOnce || relay == relayCDCCeiling
}

// isExactlyOnce reports whether relay runs with Delivery exactly_once.
func isExactlyOnce(relay string) bool {
	relay, _ = baseOf(relay)
	return relay == relayExactlyOnce || relay == relayCDCExactlyOnce || relay == relayWALExactlyOnce
}

// cdcNames returns the relay's slot of the default lease group and its publication, both named
// after the table's installation.
func cdcNames(ctx context.Context, db outbox.RowQuerier, table outbox.Table) (slot, pub string, err error) {
	id, err := outbox.ReadInstallation(ctx, db, table)
	if err != nil {
		return "", "", err
	}
	if slot, err = table.Slot(id, "default"); err != nil {
		return "", "", err
	}
	pub, err = table.Publication(id)
	return slot, pub, err
}

// cdcSettings prepares a table for the cdc relay: the write side without key locks or notify
// trigger (what source cdc allows), the publication, and the slot, marked drained.
func cdcSettings(ctx context.Context, db *sql.DB, table outbox.Table) error {
	slot, pub, err := cdcNames(ctx, db, table)
	if err != nil {
		return err
	}
	for _, q := range []string{
		"DROP TRIGGER IF EXISTS " + table.Events() + "_notify ON " + table.Events(),
		"CREATE PUBLICATION " + pub + " FOR TABLE " + table.Events() + " WITH (publish = 'insert')",
		"SELECT 1 FROM pg_create_logical_replication_slot('" + slot + "', 'pgoutput')",
		"INSERT INTO " + table.CDCSlots() + " (slot_name, drained_at) VALUES ('" + slot + "', now())",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// copySlot copies the table's slot for pg_recvlogical, before the relay consumes it, and returns
// the copy's name and the WAL position the backlog ends at.
func copySlot(ctx context.Context, db *sql.DB, table outbox.Table) (string, string, error) {
	slot, _, err := cdcNames(ctx, db, table)
	if err != nil {
		return "", "", err
	}
	ceiling := slot + "_ceil"
	var end string
	if err := db.QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text FROM pg_copy_logical_replication_slot($1, $2)",
		slot, ceiling).Scan(&end); err != nil {
		return "", "", fmt.Errorf("copy slot %s: %w", slot, err)
	}
	return ceiling, end, nil
}

// decodeCeiling runs pg_recvlogical (pgoutput, protocol 2, binary, as the relay asks) on slot
// up to end and returns how many rows per second it decoded.
func decodeCeiling(ctx context.Context, d database, pub, slot, end string, rows int) (float64, error) {
	dsn, err := url.Parse(d.dsn)
	if err != nil {
		return 0, fmt.Errorf("the PostgreSQL DSN must be a URL for pg_recvlogical: %w", err)
	}
	cmd := exec.CommandContext(ctx, "pg_recvlogical", "-d", dsn.String(), "--slot", slot, "--start", "--endpos", end,
		"--no-loop", "-o", "proto_version=2", "-o", "publication_names="+pub, "-o", "binary=true", "-f", "-")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("pg_recvlogical: %v: %s", err, stderr.String())
	}
	return float64(rows) / time.Since(began).Seconds(), nil
}

// dropCDC removes the table's slots and publication.
func dropCDC(db *sql.DB, table outbox.Table) {
	slot, pub, err := cdcNames(context.Background(), db, table)
	if err != nil {
		return
	}
	for range 50 {
		_, _ = db.Exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name LIKE $1 || '%' AND active_pid IS NOT NULL", slot)
		_, _ = db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE $1 || '%' AND NOT active", slot)
		var left int
		if db.QueryRow("SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name LIKE $1 || '%'", slot).Scan(&left) != nil || left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + pub)
	_, _ = db.Exec("DROP TABLE IF EXISTS " + table.CDCSlots())
}

// writeCost is the median duration of a single-row business transaction under one
// write-side setting, and the setting it is compared with (an index into the same slice, -1 for
// none).
type writeCost struct {
	label            string
	median           time.Duration
	base, vsSettings int
	// target is the most overhead over the base row the setting may cost (issue 22), 0 for none.
	target float64
	// role names the rows the target tables read (waltargets.go): "<source>:<path>", path
	// "sql" or "pgx"; "" for the others.
	role string
	// guard pairs the wal writer's row with the same write as a bare emit, without the slot
	// guard ("guarded:<path>" and "bare:<path>"), to show what the guard costs.
	guard string
}

// writeSetting is one way of writing the business transaction: through database/sql
// (Writer.WriteTx, one round trip per statement) or through a native pgx connection with the
// business INSERT and the event's INSERT (or, with the wal writer, its emit) in one pgx.Batch
// (Writer.QueuePgx, one round trip for both). w is nil for the business row alone; floor adds a
// SELECT 1 to it instead (database/sql: the round trip an event's own statement costs at least);
// emit calls the table's <table>_emit function through database/sql, as a plain-SQL writer would.
type writeSetting struct {
	writeCost
	w     *outbox.Writer
	pgx   bool
	floor bool
	// emit writes the event with the wal writer's table's SQL function (a writer in another
	// language) instead of w.
	emit bool
	// bare emits w's envelope with pg_logical_emit_message alone, without the slot guard of
	// w's statement: the wal write side as it was before the guard.
	bare bool
	// emitQuery, when set, emits w's envelope with this statement instead of w's (a guard
	// variant, guardvariants.go); rowCheck: it must return one row.
	emitQuery string
	rowCheck  bool
}

// measureWriteSide times single-row business transactions (an INSERT into a business table,
// plus one event in the same transaction) on PostgreSQL: without an event, with the polling
// source's write side (key lock, notify trigger), with the cdc source's (neither), and with the
// wal source's (a logical decoding message, no row); each through database/sql and through a pgx
// batch, and, through database/sql, the business row plus a SELECT 1 (the floor the wal writer's
// statement is compared with, issue 39). The settings take turns one transaction at a
// time, in a new random order each turn, so that the load of a shared machine, which changes
// within a second, and the position after another setting's commit weigh on all alike (rounds of
// 100 transactions per setting, before, put seconds between a row and its base row: the same
// build measured the cdc overhead anywhere from -1 % to +38 %).
func measureWriteSide(db *sql.DB, d database, n int, variants bool) ([]writeCost, error) {
	ctx := context.Background()
	tables, err := newWriteTables(ctx, db, d)
	if err != nil {
		return nil, err
	}
	defer tables.close()
	conn, err := pgx.Connect(ctx, d.dsn)
	if err != nil {
		return nil, fmt.Errorf("connect with pgx: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	const polling, cdc = "polling settings (key lock, notify trigger, a relay listening)", "cdc settings (no key lock, no trigger)"
	const wal = "wal settings (ModeWAL: a logical decoding message, no row)"
	settings := []writeSetting{
		{writeCost: writeCost{label: "database/sql: business row only", base: -1, vsSettings: -1, role: "base:sql"}},
		{writeCost: writeCost{label: "database/sql: business row + SELECT 1 (the round-trip floor)", base: 0, vsSettings: -1, role: "floor:sql"}, floor: true},
		{writeCost: writeCost{label: "database/sql: + 1 event (WriteTx), " + polling, base: 0, vsSettings: -1, target: 0.30, role: "polling:sql"}, w: tables.polling},
		{writeCost: writeCost{label: "database/sql: + 1 event (WriteTx), " + cdc, base: 0, vsSettings: 2, role: "cdc:sql"}, w: tables.cdc},
		{writeCost: writeCost{label: "database/sql: + 1 event (WriteTx), " + wal + "; overhead over the SELECT 1 row", base: 1, vsSettings: 2, target: 0.05, guard: "guarded:database/sql", role: "wal:sql"}, w: tables.wal},
		{writeCost: writeCost{label: "database/sql: + 1 event (SELECT <table>_emit(...), a plain-SQL writer), " + wal + "; overhead over the SELECT 1 row", base: 1, vsSettings: 2}, w: tables.wal, emit: true},
		{writeCost: writeCost{label: "pgx batch: business row only", base: -1, vsSettings: -1, role: "base:pgx"}, pgx: true},
		{writeCost: writeCost{label: "pgx batch: + 1 event (QueuePgx, same batch), " + polling, base: 6, vsSettings: -1, target: 0.15, role: "polling:pgx"}, w: tables.polling, pgx: true},
		{writeCost: writeCost{label: "pgx batch: + 1 event (QueuePgx, same batch), " + cdc, base: 6, vsSettings: 7, role: "cdc:pgx"}, w: tables.cdc, pgx: true},
		{writeCost: writeCost{label: "pgx batch: + 1 event (QueuePgx, same batch), " + wal, base: 6, vsSettings: 7, target: 0.10, guard: "guarded:pgx batch", role: "wal:pgx"}, w: tables.wal, pgx: true},
		{writeCost: writeCost{label: "database/sql: + 1 bare emit (pg_logical_emit_message without the slot guard); overhead over the SELECT 1 row", base: 1, vsSettings: 2, guard: "bare:database/sql"}, w: tables.wal, bare: true},
		{writeCost: writeCost{label: "pgx batch: + 1 bare emit (pg_logical_emit_message without the slot guard, same batch)", base: 6, vsSettings: 7, guard: "bare:pgx batch"}, w: tables.wal, pgx: true, bare: true},
	}
	if variants {
		drop, err := createBenchEmit(ctx, db, tables.wal.Table())
		if err != nil {
			return nil, err
		}
		defer drop()
		settings = append(settings, guardVariantSettings(tables.wal, tables.walSlot, 1, 6)...)
	}
	insert := "INSERT INTO " + tables.business + " (note) VALUES ($1)"
	times := make([][]time.Duration, len(settings))
	order := make([]int, len(settings))
	for i := range order {
		order[i] = i
	}
	shuffle := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for j := range n {
		shuffle.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for _, i := range order {
			s := settings[i]
			ev := makeEvent("bench.write", j, 1000, 256, false)
			began := time.Now()
			var err error
			switch {
			case s.emitQuery != "" && s.pgx:
				err = writeEmitQuery(ctx, db, conn, insert, s.emitQuery, s.rowCheck, ev)
			case s.emitQuery != "":
				err = writeEmitQuery(ctx, db, nil, insert, s.emitQuery, s.rowCheck, ev)
			case s.bare && s.pgx:
				err = writeBareEmit(ctx, db, conn, insert, s.w, ev)
			case s.bare:
				err = writeBareEmit(ctx, db, nil, insert, s.w, ev)
			case s.pgx:
				err = writePgx(ctx, conn, insert, s.w, ev)
			case s.floor:
				err = writeSQLFloor(ctx, db, insert)
			case s.emit:
				err = writeSQLEmit(ctx, db, insert, s.w.Table().WALEmitFunction(), ev)
			default:
				err = writeSQL(ctx, db, insert, s.w, ev)
			}
			if err != nil {
				return nil, err
			}
			times[i] = append(times[i], time.Since(began))
		}
	}
	out := make([]writeCost, len(settings))
	for i, s := range settings {
		slices.Sort(times[i])
		out[i] = s.writeCost
		out[i].median = times[i][len(times[i])/2]
	}
	return out, nil
}

// writeSQL runs BEGIN, the business INSERT, [w.WriteTx of ev], COMMIT through database/sql.
func writeSQL(ctx context.Context, db *sql.DB, insert string, w *outbox.Writer, ev outbox.Event) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, insert, "order"); err != nil {
		return err
	}
	if w != nil {
		if err := w.WriteTx(ctx, tx, ev); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// writeSQLFloor runs BEGIN, the business INSERT, SELECT 1, COMMIT through database/sql.
func writeSQLFloor(ctx context.Context, db *sql.DB, insert string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, insert, "order"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
		return err
	}
	return tx.Commit()
}

// writeSQLEmit runs BEGIN, the business INSERT, SELECT fn(ev's fields), COMMIT through
// database/sql: a writer in another language using the wal source's SQL function.
func writeSQLEmit(ctx context.Context, db *sql.DB, insert, fn string, ev outbox.Event) error {
	headers := []byte("{}")
	if len(ev.Headers) > 0 {
		var err error
		if headers, err = json.Marshal(ev.Headers); err != nil {
			return err
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, insert, "order"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "SELECT "+fn+"($1, $2, $3, $4, $5, $6::jsonb)",
		ev.Topic, ev.AggregateType, ev.AggregateID, ev.EventType, ev.Payload, string(headers)); err != nil {
		return fmt.Errorf("%s: %w", fn, err)
	}
	return tx.Commit()
}

// writeBareEmit runs BEGIN, the business INSERT, pg_logical_emit_message of ev's envelope with
// w's prefix and no slot guard, COMMIT: in one pgx batch on conn, or through database/sql on db
// when conn is nil.
func writeBareEmit(ctx context.Context, db *sql.DB, conn *pgx.Conn, insert string, w *outbox.Writer, ev outbox.Event) error {
	ev.CreatedAt = time.Now()
	env, err := outbox.AppendWALEnvelope(nil, []outbox.Event{ev})
	if err != nil {
		return err
	}
	emit := "SELECT pg_logical_emit_message(true, '" + w.Table().WALPrefix() + "', $1::bytea)"
	if conn == nil {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, insert, "order"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, emit, env); err != nil {
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
	batch.Queue(emit, env)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// writePgx runs BEGIN, one batch of the business INSERT [and w.QueuePgx of ev], COMMIT on conn.
func writePgx(ctx context.Context, conn *pgx.Conn, insert string, w *outbox.Writer, ev outbox.Event) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	batch := &pgx.Batch{}
	batch.Queue(insert, "order")
	if w != nil {
		if err := w.QueuePgx(batch, ev); err != nil {
			return err
		}
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// printDecodeTable prints the cdc drains beside pg_recvlogical's decode of the same rows, and
// the target: the relay drains at least 70 % of what one slot decodes.
func printDecodeTable(w io.Writer, r *results, o options) {
	if !contains(o.relays, relayCDC) {
		return
	}
	fmt.Fprintf(w, "\ncdc source against the decoding ceiling of one slot (pg_recvlogical, pgoutput protocol 2, binary, on a copy of the slot, the same rows, right after the relay's drain)")
	withFloor := contains(o.relays, relayCDCCeiling)
	if withFloor {
		fmt.Fprintf(w, " and against the cdc ceiling relay (the same stream decoded and produced to Kafka, nothing read back or deleted: the floor of any relay streaming this slot here)")
	}
	fmt.Fprintf(w, "\n\n")
	fmt.Fprint(w, "| payload | keys | outboxkit-cdc events/s | pg_recvlogical rows/s | cdc / decode | target ≥ 70 % |")
	if withFloor {
		fmt.Fprint(w, " cdc-ceiling events/s | cdc-ceiling / decode | cdc / cdc-ceiling |")
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---:|---:|---:|---:|---:|---|")
	if withFloor {
		fmt.Fprint(w, "---:|---:|---:|")
	}
	fmt.Fprintln(w)
	for _, size := range o.payloads {
		for _, keys := range o.keys {
			k := drainKey{db: "postgres", size: size, keys: keys, relay: relayCDC}
			var decode []float64
			for _, s := range r.samples[k] {
				decode = append(decode, s.decodeRate)
			}
			if len(decode) == 0 {
				continue
			}
			slices.Sort(decode)
			ceil, rate := median(decode), r.rate(k)
			fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %s | %s |", sizeLabel(size), keys, rate, ceil, percent(rate/ceil), verdict(rate >= 0.7*ceil))
			if withFloor {
				floor := r.rate(drainKey{db: "postgres", size: size, keys: keys, relay: relayCDCCeiling})
				fmt.Fprintf(w, " %.0f | %s | %s |", floor, percent(floor/ceil), percent(rate/floor))
			}
			fmt.Fprintln(w)
		}
	}
}

// printWriteTable prints the write-side cost of each setting, its overhead over the business
// transaction alone written the same way, and the cdc settings against the polling ones.
func printWriteTable(w io.Writer, costs []writeCost) {
	if len(costs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwrite side: one single-row business transaction (BEGIN, INSERT, [one 256 B event], COMMIT), PostgreSQL, the settings interleaved one transaction at a time in a shuffled order, median\n\n")
	fmt.Fprintln(w, "| transaction | median | overhead over the business row (or the row named) | vs polling settings | target |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	for _, c := range costs {
		over, vs, target := "–", "–", "–"
		if c.base >= 0 {
			overhead := float64(c.median)/float64(costs[c.base].median) - 1
			over = fmt.Sprintf("%+.0f %%", 100*overhead)
			if c.target > 0 {
				target = fmt.Sprintf("≤ +%.0f %%: %s", 100*c.target, verdict(overhead <= c.target))
			}
		}
		if c.vsSettings >= 0 {
			vs = fmt.Sprintf("%+.0f %%", 100*(float64(c.median)/float64(costs[c.vsSettings].median)-1))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", c.label, c.median.Round(time.Microsecond), over, vs, target)
	}
	printGuardCost(w, costs)
}

// printGuardCost prints what the slot guard adds to the wal writer's transaction: each guarded
// row's median against the bare emit's written the same way.
func printGuardCost(w io.Writer, costs []writeCost) {
	bare := map[string]writeCost{}
	for _, c := range costs {
		if path, ok := strings.CutPrefix(c.guard, "bare:"); ok {
			bare[path] = c
		}
	}
	for _, c := range costs {
		path, ok := strings.CutPrefix(c.guard, "guarded:")
		b, found := bare[path]
		if !ok || !found {
			continue
		}
		fmt.Fprintf(w, "\nslot guard, %s: %s guarded vs %s bare: %+.1f %% of the transaction\n", path,
			c.median.Round(time.Microsecond), b.median.Round(time.Microsecond), 100*(float64(c.median)/float64(b.median)-1))
	}
	for _, c := range costs {
		path, ok := strings.CutPrefix(c.guard, "variant:")
		b, found := bare[path]
		if !ok || !found {
			continue
		}
		fmt.Fprintf(w, "guard variant vs bare emit, %s: %+.1f %% of the transaction\n", c.label,
			100*(float64(c.median)/float64(b.median)-1))
	}
}
