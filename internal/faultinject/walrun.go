package faultinject

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxkit/outboxkit/outbox"
)

// The wal variant (Config.Source wal, docs/wal.md): the writers emit each event as a
// transactional logical decoding message instead of a row, in three ways taken in turn by the
// writer goroutines: outbox.Writer in ModeWAL through database/sql, the same writer through a
// native pgx transaction (the emit queued into a batch), and the SQL function <table>_emit that
// other languages call. The slot is created the documented way (`outboxkit wal-slot create`)
// before the writers start and dropped with its publication at the end.

// validateWAL checks the wal variant's settings.
func (c Config) validateWAL() error {
	if c.source() != "wal" {
		if c.WALSlot != "" {
			return fmt.Errorf("faultinject: WALSlot %q with source %s: the slot is the wal source's", c.WALSlot, c.source())
		}
		return nil
	}
	switch {
	case c.Dialect != outbox.Postgres:
		return fmt.Errorf("faultinject: source wal with database %s: the wal source needs PostgreSQL", c.Dialect)
	case c.Installations > 1:
		return fmt.Errorf("faultinject: source wal with %d installations: the variant runs one", c.Installations)
	case c.SQLWriters:
		return errors.New("faultinject: source wal with SQLWriters: the wal variant's writers are its own (Go, pgx and <table>_emit)")
	case c.WALSlot != "":
		return outbox.ValidateSlotName(c.WALSlot)
	}
	return nil
}

// walSlot is the run's wal slot (newEnv sets Config.WALSlot's default).
func (e *env) walSlot() string { return e.cfg.WALSlot }

// createWALSlot creates and registers the run's slot with `outboxkit wal-slot create`, as a
// deployment does before its writers start (they are refused until then), and drops it, and
// its publication, at close.
func (e *env) createWALSlot(ctx context.Context, in *installation) error {
	slot := e.walSlot()
	if !e.cfg.Keep {
		e.defer_(func() {
			if err := dropWALSlot(in.db, in.table, slot); err != nil {
				e.logf("%v", err)
			}
		})
	}
	path := filepath.Join(e.workDir, "wal-slot.yaml")
	if err := writeRelayConfig(path, e.cfg, relaySettings{dsn: in.dsn, table: in.configured, dlq: e.topic + "-dlq",
		relayID: "fault-wal-slot", checkpoints: e.checkpointTopic(), walSlot: slot}); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, e.bin, "wal-slot", "create", slot, "--config", path)
	cmd.Env = relayEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("faultinject: outboxkit wal-slot create %s: %w: %s", slot, err, out)
	}
	e.logf("%s", out)
	return nil
}

// dropWALSlot removes the wal slot with outbox.DropWALSlot, which also drops its publication,
// after terminating the walsender a SIGKILLed relay may have left behind.
func dropWALSlot(db *sql.DB, table outbox.Table, slot string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		_, _ = db.ExecContext(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
		if err = outbox.DropWALSlot(ctx, db, table, slot); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("faultinject: drop wal slot %s: %w", slot, err)
}

// DropReplicationSlot drops the replication slot and the publication named slot on the
// PostgreSQL at dsn, if they exist, terminating the walsender that holds the slot: a test's
// cleanup for a run that stopped before its own (Run drops the slot it created). It returns an
// error when the slot or the publication is still there after 30 s.
func DropReplicationSlot(ctx context.Context, dsn, slot string) error {
	if err := outbox.ValidateSlotName(slot); err != nil {
		return err
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, _ = db.ExecContext(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
		_, _ = db.ExecContext(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", slot)
		_, _ = db.ExecContext(ctx, "DROP PUBLICATION IF EXISTS "+slot) // a validated slot name
		var left int
		err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1)
			+ (SELECT count(*) FROM pg_publication WHERE pubname = $1)`, slot).Scan(&left)
		if err == nil && left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("faultinject: replication slot or publication %s still there (%d): %v", slot, left, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// newWALWriters returns the wal variant's three writers of installation in: outbox.Writer in
// ModeWAL through database/sql, the same through native pgx transactions, and <table>_emit.
func (e *env) newWALWriters(ctx context.Context, in *installation, maxPayload int) ([]eventWriter, error) {
	goWriter, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: in.configured, Mode: outbox.ModeWAL,
		WALSlot: e.walSlot(), MaxPayloadBytes: maxPayload})
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, in.dsn)
	if err != nil {
		return nil, fmt.Errorf("faultinject: pgx pool: %w", err)
	}
	e.defer_(pool.Close)
	return []eventWriter{goWriter, &pgxWALWriter{pool: pool, w: goWriter}, newEmitFuncWriter(in.table)}, nil
}

// pgxWALWriter writes a whole transaction on a native pgx connection: the counters' UPDATEs,
// then the emit queued into a batch (outbox.Writer.QueuePgx). writeTx hands it the
// transaction's work (writePgxTx); it has no database/sql path.
type pgxWALWriter struct {
	pool *pgxpool.Pool
	w    *outbox.Writer
}

// WriteTx refuses: the pgx writer runs its transactions itself (env.writePgxTx).
func (w *pgxWALWriter) WriteTx(context.Context, *sql.Tx, ...outbox.Event) error {
	return errors.New("faultinject: the pgx writer writes through its own pgx transaction (writePgxTx)")
}

// writePgxTx is writeTx for the pgx writer: one pgx transaction advancing the keys' counters
// and emitting one event per key, committed or rolled back.
func (e *env) writePgxTx(ctx context.Context, in *installation, w *pgxWALWriter, keys []string, rollback, poison bool) ([]string, bool, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return nil, false, err
	}
	events, err := e.events(func(k string) (int64, error) {
		var seq int64
		err := tx.QueryRow(ctx, "UPDATE "+in.keysTable+" SET seq = seq + 1 WHERE k = $1 RETURNING seq", k).Scan(&seq)
		return seq, err
	}, in, keys, poison)
	if err == nil {
		batch := &pgx.Batch{}
		if err = w.w.QueuePgx(batch, events...); err == nil {
			err = tx.SendBatch(ctx, batch).Close()
		}
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, false, err
	}
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.ID.String()
	}
	if rollback {
		if err := tx.Rollback(ctx); err != nil {
			return ids, false, fmt.Errorf("rollback: %w", err)
		}
		return ids, false, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return ids, false, &commitError{err}
	}
	return ids, true, nil
}

// emitFuncWriter writes events the way a service in another language does with the wal
// source (docs/writers.md): one call of <table>_emit per event, which validates the event and
// emits the same envelope as outbox.Writer.
type emitFuncWriter struct{ query string }

func newEmitFuncWriter(table outbox.Table) *emitFuncWriter {
	return &emitFuncWriter{query: "SELECT " + table.WALEmitFunction() + "($1, $2, $3, $4, $5::bytea, $6::jsonb, $7, $8::uuid)"}
}

// WriteTx emits events in tx, in the given order.
func (w *emitFuncWriter) WriteTx(ctx context.Context, tx *sql.Tx, events ...outbox.Event) error {
	for _, ev := range events {
		headers := ev.Headers
		if headers == nil {
			headers = map[string]string{}
		}
		h, err := json.Marshal(headers)
		if err != nil {
			return fmt.Errorf("faultinject: headers of event %s: %w", ev.ID, err)
		}
		if _, err := tx.ExecContext(ctx, w.query, ev.Topic, ev.AggregateType, ev.AggregateID, ev.EventType,
			ev.Payload, string(h), ev.TenantID, ev.ID.String()); err != nil {
			return fmt.Errorf("faultinject: emit function, event %s (key %s): %w", ev.ID, ev.AggregateID, err)
		}
	}
	return nil
}
