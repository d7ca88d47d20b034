package outbox

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
)

//go:embed migrations
var migrationFiles embed.FS

// Migration is one versioned schema change, already rendered for a table.
type Migration struct {
	// Version orders the migrations; it is recorded in the table's migrations table.
	Version int
	// Name is the migration's file name.
	Name string
	// Statements are executed in order.
	Statements []string
}

// templateData is what the migration templates may use; every value is a validated identifier
// or a number.
type templateData struct {
	Events, Leases, Relays, KeyLocks, Short, Channel string
	KeyLockSlotList                                  []int
}

// Migrations returns the schema migrations of the table, in version order.
func Migrations(table Table) ([]Migration, error) {
	if err := table.dialect.Validate(); err != nil {
		return nil, err
	}
	data := templateData{
		Events: table.Events(), Leases: table.Leases(), Relays: table.Relays(), KeyLocks: table.KeyLocks(),
		Short: table.shortName(), Channel: table.Channel(),
	}
	for s := range keyLockSlots {
		data.KeyLockSlotList = append(data.KeyLockSlotList, s)
	}
	dir := path.Join("migrations", string(table.dialect))
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: read embedded migrations for %s: %w", table.dialect, err)
	}
	var out []Migration
	for _, entry := range entries {
		name := entry.Name()
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("outbox: migration file %s has no numeric version prefix", name)
		}
		text, err := migrationFiles.ReadFile(path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("outbox: read migration %s: %w", name, err)
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("outbox: parse migration %s: %w", name, err)
		}
		var rendered strings.Builder
		if err := tmpl.Execute(&rendered, data); err != nil {
			return nil, fmt.Errorf("outbox: render migration %s: %w", name, err)
		}
		m := Migration{Version: version, Name: name}
		for _, stmt := range strings.Split(rendered.String(), "-- statement\n") {
			if s := strings.TrimSpace(stripComments(stmt)); s != "" {
				m.Statements = append(m.Statements, s)
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// stripComments drops whole-line "--" comments (outboxkit's SQL has no "--" inside literals).
func stripComments(stmt string) string {
	lines := strings.Split(stmt, "\n")
	kept := lines[:0]
	for _, line := range lines {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// Migrate creates or upgrades the outbox table, its indexes and the relay tables, applying each
// embedded migration not yet recorded in the table's migrations table. It is idempotent and safe
// to run from several processes at once (every statement is IF NOT EXISTS; on PostgreSQL an
// advisory lock also serializes the runs). On MySQL, DDL commits implicitly, so a failed run is
// completed by the next one.
func Migrate(ctx context.Context, db *sql.DB, table Table) error {
	migrations, err := Migrations(table)
	if err != nil {
		return err
	}
	d := table.dialect
	create := "CREATE TABLE IF NOT EXISTS " + table.Migrations() + " (version INTEGER PRIMARY KEY, applied_at " +
		map[Dialect]string{Postgres: "TIMESTAMPTZ", MySQL: "DATETIME(6)", SQLite: "TEXT"}[d] + " NOT NULL)"
	if _, err := db.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("outbox: create %s: %w", table.Migrations(), err)
	}
	for _, m := range migrations {
		if err := applyMigration(ctx, db, table, m); err != nil {
			return fmt.Errorf("outbox: migration %s on %s: %w", m.Name, table, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, table Table, m Migration) error {
	d := table.dialect
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if d == Postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", KeyHash("outboxkit-migrate", "", table.Events())); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
	}
	var applied int
	if err := tx.QueryRowContext(ctx, d.Rebind("SELECT COUNT(*) FROM "+table.Migrations()+" WHERE version = ?"),
		m.Version).Scan(&applied); err != nil {
		return fmt.Errorf("read applied versions: %w", err)
	}
	if applied > 0 {
		return nil
	}
	for i, stmt := range m.Statements {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
	}
	insert := map[Dialect]string{
		Postgres: "INSERT INTO %s (version, applied_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
		MySQL:    "INSERT IGNORE INTO %s (version, applied_at) VALUES (?, ?)",
		SQLite:   "INSERT OR IGNORE INTO %s (version, applied_at) VALUES (?, ?)",
	}[d]
	if _, err := tx.ExecContext(ctx, d.Rebind(fmt.Sprintf(insert, table.Migrations())), m.Version,
		d.TimeArg(time.Now())); err != nil {
		return fmt.Errorf("record version: %w", err)
	}
	return tx.Commit()
}
