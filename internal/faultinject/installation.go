package faultinject

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// installation is one service's outbox as a user deploys it: its outbox table (and the relay
// tables derived from it), the business table of per-key counters its writers advance, its
// writer and its supervised relays. A run has Config.Installations of them; with more than
// one, each lives in a PostgreSQL schema of its own and uses the configured table name
// unqualified, resolved through its connections' search_path, like two services sharing one
// database server.
type installation struct {
	index int
	// schema is the installation's own schema ("" when the run has a single installation).
	schema string
	// db resolves the installation's unqualified names: the run's pool, or, with a schema,
	// a pool whose connections have search_path set to it.
	db *sql.DB
	// dsn is db's DSN, given to the relays (with their application_name added).
	dsn string
	// configured is the relays' database.table ("" leaves the CLI's default).
	configured string
	table      outbox.Table
	// keysTable holds the per-key counters; keyPrefix starts its aggregate ids, so the keys
	// of two installations never collide on a shared topic.
	keysTable, keyPrefix string
	writers              []eventWriter // the writer goroutines' writers, by slot (writerFor)
	rl                   *relays
	// appName is the PostgreSQL application_name of its relays' connections.
	appName string
}

// key is the aggregate id of the installation's key number i.
func (in *installation) key(i int) string { return fmt.Sprintf("%skey-%05d", in.keyPrefix, i) }

// newInstallations creates each installation's schema (with several), outbox and business
// tables, and writer; the relays are started later by startRelays.
func (e *env) newInstallations(ctx context.Context) error {
	n := e.cfg.Installations
	if n > 1 && e.cfg.Dialect != outbox.Postgres {
		return fmt.Errorf("faultinject: %d installations need PostgreSQL (a schema each)", n)
	}
	for i := range n {
		in := &installation{index: i, db: e.db, dsn: e.cfg.DSN, configured: e.cfg.Table,
			keysTable: e.name + "_keys", appName: "outboxkit-fault-relay-" + e.name}
		if n > 1 {
			if err := e.ownSchema(ctx, in); err != nil {
				return err
			}
		} else if in.configured == "" {
			in.configured = e.name
		}
		if err := e.createTables(ctx, in); err != nil {
			return err
		}
		e.insts = append(e.insts, in)
	}
	return nil
}

// ownSchema gives installation in a schema of its own and a pool whose search_path is that
// schema, so that its unqualified table names resolve there (the outbox's, the relays').
func (e *env) ownSchema(ctx context.Context, in *installation) error {
	in.schema = fmt.Sprintf("%s_svc%d", e.name, in.index)
	in.keyPrefix = fmt.Sprintf("svc%d-", in.index)
	in.appName = fmt.Sprintf("outboxkit-fault-relay-%s-svc%d", e.name, in.index)
	in.keysTable = in.schema + ".business_keys"
	if err := e.createSchema(ctx, in.schema); err != nil {
		return err
	}
	in.dsn = withSearchPath(e.cfg.DSN, in.schema)
	db, err := sql.Open(driver(e.cfg.Dialect), in.dsn)
	if err != nil {
		return fmt.Errorf("faultinject: open installation %d: %w", in.index, err)
	}
	e.defer_(func() { _ = db.Close() })
	db.SetMaxOpenConns(e.cfg.Writers + 4)
	var path string
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&path); err != nil || path != in.schema {
		return fmt.Errorf("faultinject: installation %d: current_schema() is %q (%v), want %q: the DSN's search_path did not apply",
			in.index, path, err, in.schema)
	}
	in.db = db
	return nil
}

// createSchema creates schema (a name this package generated or the schema part of
// Config.Table, both validated identifiers) unless it exists, and drops it with everything in
// it at close if it created it (unless Keep).
func (e *env) createSchema(ctx context.Context, schema string) error {
	var exists bool
	// Unquoted, as every configured name is used: PostgreSQL folds it to lower case.
	if err := e.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = lower($1))", schema).Scan(&exists); err != nil {
		return fmt.Errorf("faultinject: look up schema %s: %w", schema, err)
	}
	if exists {
		return nil
	}
	if _, err := e.db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("faultinject: create schema %s: %w", schema, err)
	}
	if !e.cfg.Keep {
		e.defer_(func() { _, _ = e.db.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE") })
	}
	return nil
}

// createTables migrates the installation's outbox table (as its relays will name it), creates
// its business table of per-key counters, and its writer.
func (e *env) createTables(ctx context.Context, in *installation) error {
	var err error
	if in.table, err = outbox.NewTable(e.cfg.Dialect, in.configured); err != nil {
		return err
	}
	if s, _, ok := strings.Cut(in.configured, "."); ok && in.schema == "" {
		if err := e.createSchema(ctx, s); err != nil {
			return err
		}
	}
	if !e.cfg.Keep && in.schema == "" {
		e.defer_(func() { e.dropTables(in) })
		if e.cfg.Source == "cdc" {
			// Runs before the tables are dropped and after the relays stopped.
			e.defer_(func() { dropCDCSlot(e.db, in.table) })
		}
	} else if !e.cfg.Keep && e.cfg.Source == "cdc" {
		e.defer_(func() { dropCDCSlot(in.db, in.table) })
	}
	if err := outbox.Migrate(ctx, in.db, in.table); err != nil {
		return fmt.Errorf("faultinject: migrate %s (installation %d): %w", in.table, in.index, err)
	}
	if err := e.createKeys(ctx, in); err != nil {
		return err
	}
	if e.cfg.source() == "wal" {
		if err := e.createWALSlot(ctx, in); err != nil {
			return err
		}
	}
	maxPayload := 0 // the writer's default limit
	if e.cfg.PoisonEvents > 0 {
		maxPayload = -1 // poison events are over the broker's limit on purpose
	}
	in.writers, err = e.newEventWriters(ctx, in, maxPayload)
	return err
}

// dropTables drops the tables of a single installation (a run with several drops their
// schemas): every table the migrations create (outbox.Table.Tables) and the business table,
// and on PostgreSQL the functions the migrations create beside them, which a dropped table
// leaves behind.
func (e *env) dropTables(in *installation) {
	for _, t := range append(in.table.Tables(), in.keysTable) {
		_, _ = e.db.Exec("DROP TABLE IF EXISTS " + t)
	}
	if e.cfg.Dialect == outbox.Postgres {
		e.dropFunctions(in.table)
	}
}

// dropFunctions drops the migrations' functions of the outbox table (outbox.Table.Functions); a
// schema-qualified table's schema is dropped whole instead.
func (e *env) dropFunctions(table outbox.Table) {
	if strings.Contains(table.Events(), ".") {
		return
	}
	_, _ = e.db.Exec("DROP FUNCTION IF EXISTS " + strings.Join(table.Functions(), ", "))
}

// createKeys creates the installation's business table of per-key counters, one row per key.
func (e *env) createKeys(ctx context.Context, in *installation) error {
	textType := "text"
	if e.cfg.Dialect == outbox.MySQL {
		textType = "VARCHAR(64)"
	}
	q := "CREATE TABLE " + in.keysTable + " (k " + textType + " PRIMARY KEY, seq BIGINT NOT NULL DEFAULT 0)"
	if _, err := e.db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("faultinject: %s: %w", q, err)
	}
	for first := 1; first <= e.cfg.Keys; first += 500 {
		var values []string
		var args []any
		for i := first; i < first+500 && i <= e.cfg.Keys; i++ {
			values = append(values, "(?)")
			args = append(args, in.key(i))
		}
		if _, err := e.db.ExecContext(ctx, e.q("INSERT INTO "+in.keysTable+" (k) VALUES "+strings.Join(values, ", ")), args...); err != nil {
			return fmt.Errorf("faultinject: insert keys: %w", err)
		}
	}
	return nil
}

// startRelays starts Config.Relays supervised relay processes per installation, each with its
// configuration and log in the installation's directory of the work directory.
func (e *env) startRelays() error {
	for _, in := range e.insts {
		dir := e.workDir
		if len(e.insts) > 1 {
			dir = filepath.Join(e.workDir, fmt.Sprintf("svc%d", in.index))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		// On PostgreSQL the relays' connections carry an application_name of their own, so the
		// database cut terminates theirs only (on MariaDB they are told apart by their ports).
		dsn := in.dsn
		if e.cfg.Dialect == outbox.Postgres {
			dsn = withAppName(dsn, in.appName)
		}
		writeConfig := func(path, relayID string) error {
			return writeRelayConfig(path, e.cfg, relaySettings{dsn: dsn, table: in.configured, dlq: e.topic + "-dlq",
				relayID: relayID, checkpoints: e.checkpointTopic(), walSlot: e.cfg.WALSlot})
		}
		e.logf("starting %d relays (%s) on %s for installation %d (table %s), configs and logs in %s",
			e.cfg.Relays, e.bin, e.cfg.Dialect, in.index, in.table, dir)
		in.rl = startRelays(e.bin, dir, in.keyPrefix, e.cfg.Relays, e.cfg.Seed+uint64(in.index), writeConfig)
	}
	e.defer_(func() {
		if !e.relaysDone {
			e.stopRelays(10 * time.Second)
		}
	})
	return nil
}

// stopRelays stops every installation's relays.
func (e *env) stopRelays(grace time.Duration) {
	for _, in := range e.insts {
		if in.rl != nil {
			in.rl.stop(grace)
		}
	}
}

// checkpointTopic is the relays' forwarder.checkpoint_topic in exactly-once mode: shared by
// the single-installation runs (each run's units have a prefix of their own, from its table);
// with several installations one of the run's own, shared by them as a default would be, so
// that no earlier run's checkpoints (same default prefix) are in it.
func (e *env) checkpointTopic() string {
	if len(e.insts) > 1 {
		return e.topic + "-checkpoints"
	}
	return "faultinject.checkpoints"
}

// withSearchPath sets search_path on every connection of a postgres:// URL or key=value DSN,
// through the startup option "-c search_path=..." (pgx sends it as a runtime parameter).
func withSearchPath(dsn, schema string) string {
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		// %20, not QueryEscape's "+": pgx reads the space of "-c search_path" literally otherwise.
		return dsn + sep + "options=" + strings.ReplaceAll(url.QueryEscape("-c search_path="+schema), "+", "%20")
	}
	return dsn + " options='-c search_path=" + schema + "'"
}
