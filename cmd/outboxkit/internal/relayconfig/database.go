package relayconfig

import (
	"fmt"
	"strings"

	"github.com/outboxkit/outboxkit/outbox"
)

// Database is the database section.
type Database struct {
	// Dialect is postgres, mysql or sqlite (aliases: postgresql, pgx, mariadb, sqlite3). Required.
	Dialect outbox.Dialect
	// DSN is the driver's data source name: a secret, printed only through RedactDSN. Required.
	DSN string
	// Table is the outbox table. Default: outbox.DefaultTable.
	Table string
	// MaxOpenConns caps the relay's connections to the database (its workers, heartbeats,
	// statistics, the probes and the admin API share them): requests beyond it wait for a free
	// one. Default: DefaultMaxOpenConns. SQLite always uses one.
	MaxOpenConns int
}

// DefaultMaxOpenConns is the default cap of the relay's database connections: enough for the
// default two workers, the heartbeats, the statistics and the admin API at once, with room to
// spare; a relay with many more workers needs more (at least forwarder.workers + 4).
const DefaultMaxOpenConns = 20

// fields binds the section's keys.
func (d *Database) fields() []field {
	return []field{
		{key: "dialect", target: (*string)(&d.Dialect)},
		{key: "dsn", target: &d.DSN},
		{key: "table", target: &d.Table},
		{key: "max_open_conns", target: &d.MaxOpenConns, positive: true},
	}
}

func (d *Database) applyEnv(lookup func(string) (string, bool)) error {
	if lookup == nil {
		return nil
	}
	if v, ok := lookup(EnvDatabaseDialect); ok {
		dialect, err := outbox.ParseDialect(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%s (database.dialect): unknown value %q (allowed: postgres, mysql, sqlite)", EnvDatabaseDialect, v)
		}
		d.Dialect = dialect
	}
	if v, ok := lookup(EnvDatabaseDSN); ok {
		d.DSN = strings.TrimSpace(v)
	}
	if v, ok := lookup(EnvDatabaseTable); ok {
		d.Table = strings.TrimSpace(v)
	}
	return nil
}

// validate checks the section and fills its defaults: the dialect's canonical name, the table
// and the connection cap.
func (d *Database) validate() error {
	if d.Dialect == "" {
		return fmt.Errorf("database.dialect: missing (allowed: postgres, mysql, sqlite; or set %s)", EnvDatabaseDialect)
	}
	dialect, err := outbox.ParseDialect(string(d.Dialect))
	if err != nil {
		return fmt.Errorf("database.dialect: unknown value %q (allowed: postgres, mysql, sqlite)", d.Dialect)
	}
	d.Dialect = dialect
	if d.DSN == "" {
		return fmt.Errorf("database.dsn: missing (or set %s)", EnvDatabaseDSN)
	}
	if d.Table == "" {
		d.Table = outbox.DefaultTable
	}
	if d.MaxOpenConns == 0 {
		d.MaxOpenConns = DefaultMaxOpenConns
	}
	if _, err := outbox.NewTable(d.Dialect, d.Table); err != nil {
		return fmt.Errorf("database.table: %q is not a valid table name (letters, digits and underscores, optionally schema.table, at most 48 characters)", d.Table)
	}
	return nil
}
