package outbox

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
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
	Events, Leases, Relays, KeyLocks, Installation, Units, Short, Channel string
	// Schema is the table's schema and a dot ("app.") or empty: it qualifies index names in
	// DROP INDEX, which, unlike CREATE INDEX, does not look in the table's schema.
	Schema          string
	KeyLockSlotList []int
	// What the any-writer trigger (docs/writers.md) computes and checks the way outbox.Writer
	// does: the relay partitions, the advisory-lock namespace (PostgreSQL), the key-lock slots
	// (MySQL), the reserved header names and prefixes, the limits of validate.go.
	Partitions, KeyLockSlots, MaxTextField, MaxHeadersBytes int
	AdvisoryNamespace                                       int32
	// WakeNamespace and WakeLock are the advisory-lock keys a waiting relay holds and the notify
	// trigger tries (PostgreSQL, [Table.WakeLock]).
	WakeNamespace, WakeLock int32
	ReservedHeaders         []string
	ReservedPrefixes        []string
	// WALPrefix is the prefix of the table's logical decoding messages ([Table.WALPrefix]): a
	// validated identifier in lower case behind a fixed text, safe in a string literal.
	WALPrefix string
}

// Migrations returns the schema migrations of the table, in version order.
func Migrations(table Table) ([]Migration, error) {
	if err := table.dialect.Validate(); err != nil {
		return nil, err
	}
	data := templateData{
		Events: table.Events(), Leases: table.Leases(), Relays: table.Relays(), KeyLocks: table.KeyLocks(),
		Installation: table.Installation(), Units: table.Units(),
		Short: table.shortName(), Channel: table.Channel(),
		Schema:        strings.TrimSuffix(table.Events(), table.shortName()),
		WakeNamespace: WakeNamespace, WakeLock: table.WakeLock(),
		WALPrefix: table.WALPrefix(),
	}
	for s := range keyLockSlots {
		data.KeyLockSlotList = append(data.KeyLockSlotList, s)
	}
	if err := data.addWriterRules(); err != nil {
		return nil, err
	}
	return LoadMigrations(migrationFiles, path.Join("migrations", string(table.dialect)), data)
}

// sqlLiteralSafe matches the reserved header names and prefixes rendered into SQL string literals.
var sqlLiteralSafe = regexp.MustCompile(`^[a-z_]+$`)

// addWriterRules fills in the constants the any-writer trigger shares with outbox.Writer, so the
// database and Go compute and refuse the same things.
func (d *templateData) addWriterRules() error {
	d.Partitions, d.KeyLockSlots, d.AdvisoryNamespace = Partitions, keyLockSlots, AdvisoryNamespace
	d.MaxTextField, d.MaxHeadersBytes = maxTextField, MaxHeadersBytes
	d.ReservedHeaders = slices.Sorted(maps.Keys(reservedMetadata))
	d.ReservedPrefixes = []string{reservedPrefixWatermill, reservedPrefixOutbox}
	for _, name := range slices.Concat(d.ReservedHeaders, d.ReservedPrefixes) {
		if !sqlLiteralSafe.MatchString(name) {
			return fmt.Errorf("outbox: reserved header %q cannot be rendered into a migration", name)
		}
	}
	return nil
}

// LoadMigrations reads the migration files of dir in fsys, renders each one as a text/template
// with data (a missing map key is an error) and returns them in version order. A file is named
// "<version>_<name>.sql" with a numeric version ("0002_lease_epoch.sql"); its statements are
// separated by "-- statement" lines, and whole-line "--" comments are dropped. Files not ending
// in ".sql" are ignored. Only validated identifiers and numbers may be rendered into the SQL.
func LoadMigrations(fsys fs.FS, dir string, data any) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: read migrations in %s: %w", dir, err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, entry := range entries {
		name := entry.Name()
		if entry.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil || version <= 0 {
			return nil, fmt.Errorf("outbox: migration file %s/%s has no positive numeric version prefix", dir, name)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("outbox: migration files %s and %s in %s have the same version %d", other, name, dir, version)
		}
		seen[version] = name
		text, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("outbox: read migration %s/%s: %w", dir, name, err)
		}
		tmpl, err := template.New(name).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("outbox: parse migration %s/%s: %w", dir, name, err)
		}
		var rendered strings.Builder
		if err := tmpl.Execute(&rendered, data); err != nil {
			return nil, fmt.Errorf("outbox: render migration %s/%s: %w", dir, name, err)
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
// embedded migration not yet recorded in the table's migrations table, with [RunMigrations], and
// binds an installation not yet bound to the database db is connected to ([ReadInstallation]:
// an installation made before the binding existed is bound to the database it is in when it is
// first migrated with this version). It is idempotent and safe to run from several processes at
// once.
func Migrate(ctx context.Context, db *sql.DB, table Table) error {
	migrations, err := Migrations(table)
	if err != nil {
		return err
	}
	if err := RunMigrations(ctx, db, table.dialect, table.Migrations(), migrations); err != nil {
		return err
	}
	return bindInstallation(ctx, db, table)
}

// RunMigrations applies, in version order, each of migrations not yet recorded in versionTable
// (created if missing), and records it there. versionTable passes the checks of
// [ValidateIdentifier] except that, as a derived name ("<table>_migrations"), it may be longer
// (up to 63 characters per part). It is the one migration runner of outboxkit: the outbox
// ([Migrate]) and the consumer's inbox both use it, each with its own versionTable.
//
// Runs on one versionTable are serialized on every dialect, so several processes may run it at
// once and each migration is applied once:
//
//   - PostgreSQL: each migration is one transaction holding outboxkit's two-key advisory lock
//     ([AdvisoryXactLock]) on versionTable, so a failed migration leaves nothing behind;
//   - MySQL/MariaDB: the whole run holds GET_LOCK on a name derived from the current database and
//     versionTable, on one connection. DDL commits implicitly there, so a migration that fails
//     halfway must be completed by hand or be written to be re-runnable;
//   - SQLite: each migration is one BEGIN IMMEDIATE transaction (the database's single-writer
//     lock), waiting up to 30 s for another writer unless the connection's busy_timeout is longer.
func RunMigrations(ctx context.Context, db *sql.DB, dialect Dialect, versionTable string, migrations []Migration) (err error) {
	if err := dialect.Validate(); err != nil {
		return err
	}
	if err := checkIdentifier(versionTable, 2*maxIdentifierPart+1); err != nil {
		return fmt.Errorf("outbox: migrations table: %w", err)
	}
	sorted := append([]Migration(nil), migrations...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Version < sorted[j].Version })
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("outbox: %s: connect: %w", versionTable, err)
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	var cleanup func() error
	switch dialect {
	case MySQL:
		cleanup, err = lockMySQL(ctx, conn, versionTable)
	case SQLite:
		cleanup, err = sqliteBusyTimeout(ctx, conn)
	}
	if err != nil {
		return fmt.Errorf("outbox: %s: %w", versionTable, err)
	}
	if cleanup != nil {
		defer func() {
			if cerr := cleanup(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("outbox: %s: %w", versionTable, cerr))
			}
		}()
	}
	s := migrationSession{dialect: dialect, conn: conn, versionTable: versionTable}
	if err := s.locked(ctx, s.createVersionTable); err != nil {
		return fmt.Errorf("outbox: create %s: %w", versionTable, err)
	}
	for _, m := range sorted {
		if err := s.locked(ctx, func(ctx context.Context, ex executor) error { return s.apply(ctx, ex, m) }); err != nil {
			return fmt.Errorf("outbox: %s: migration %s: %w", versionTable, m.Name, err)
		}
	}
	return nil
}

// executor is what a migration step runs its statements on: a transaction, or (SQLite) the
// connection inside BEGIN IMMEDIATE.
type executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// migrationSession runs the steps of one RunMigrations call on one connection.
type migrationSession struct {
	dialect      Dialect
	conn         *sql.Conn
	versionTable string
}

// locked runs step in a transaction serialized with every other run on the same versionTable
// (see RunMigrations), and commits it.
func (s migrationSession) locked(ctx context.Context, step func(context.Context, executor) error) error {
	if s.dialect == SQLite {
		return s.lockedSQLite(ctx, step)
	}
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if s.dialect == Postgres {
		if _, err := tx.ExecContext(ctx, "SELECT "+AdvisoryXactLock("$1"), AdvisoryKey("migrate:"+s.versionTable)); err != nil {
			return fmt.Errorf("advisory lock: %w", err)
		}
	}
	if err := step(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// lockedSQLite runs step inside BEGIN IMMEDIATE, which takes SQLite's write lock up front
// (database/sql's BeginTx would start a deferred transaction, which fails instead of waiting when
// two of them upgrade to writing at once).
func (s migrationSession) lockedSQLite(ctx context.Context, step func(context.Context, executor) error) error {
	if _, err := s.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin immediate: %w", err)
	}
	if err := step(ctx, s.conn); err != nil {
		if _, rerr := s.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			discard(s.conn)
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if _, err := s.conn.ExecContext(ctx, "COMMIT"); err != nil {
		if _, rerr := s.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			discard(s.conn)
		}
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

var appliedAtType = map[Dialect]string{Postgres: "TIMESTAMPTZ", MySQL: "DATETIME(6)", SQLite: "TEXT"}

func (s migrationSession) createVersionTable(ctx context.Context, ex executor) error {
	_, err := ex.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+s.versionTable+
		" (version INTEGER PRIMARY KEY, applied_at "+appliedAtType[s.dialect]+" NOT NULL)")
	return err
}

var recordVersion = map[Dialect]string{
	Postgres: "INSERT INTO %s (version, applied_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
	MySQL:    "INSERT IGNORE INTO %s (version, applied_at) VALUES (?, ?)",
	SQLite:   "INSERT OR IGNORE INTO %s (version, applied_at) VALUES (?, ?)",
}

// apply runs m unless its version is already recorded, and records it.
func (s migrationSession) apply(ctx context.Context, ex executor, m Migration) error {
	d := s.dialect
	var applied int
	if err := ex.QueryRowContext(ctx, d.Rebind("SELECT COUNT(*) FROM "+s.versionTable+" WHERE version = ?"),
		m.Version).Scan(&applied); err != nil {
		return fmt.Errorf("read applied versions: %w", err)
	}
	if applied > 0 {
		return nil
	}
	for i, stmt := range m.Statements {
		if _, err := ex.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
	}
	res, err := ex.ExecContext(ctx, d.Rebind(fmt.Sprintf(recordVersion[d], s.versionTable)), m.Version, d.TimeArg(time.Now()))
	if err != nil {
		return fmt.Errorf("record version: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("record version: rows affected: %w", err)
	}
	if n == 0 {
		// Impossible while every run holds the lock: say so instead of hiding a double apply.
		return fmt.Errorf("version %d was recorded by another run while this one applied it: the runs were not "+
			"serialized (is an older outboxkit migrating the same table?); run the migration again", m.Version)
	}
	return nil
}
