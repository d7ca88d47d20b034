package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// Statements renders the forwarder's statements for one outbox table, lease group and tenant
// filter. The table names come from outbox.Table, already validated; every value is a bind
// argument.
type Statements struct {
	d       Dialect
	table   outbox.Table
	group   string
	tenants []string
	now     func() time.Time
}

// New returns the statements of table (made by outbox.NewTable, whose dialect is valid) for the
// lease group and, when tenants is not empty, the rows of those tenants only.
func New(table outbox.Table, group string, tenants []string) Statements {
	d, _ := For(table.Dialect())
	return Statements{d: d, table: table, group: group, tenants: tenants, now: time.Now}
}

// WithClock returns s reading the time of the values it binds (not the database's clock) from now.
func (s Statements) WithClock(now func() time.Time) Statements {
	s.now = now
	return s
}

// Dialect is the adapter of the table's database.
func (s Statements) Dialect() Dialect { return s.d }

// LeaseTx runs fn in a transaction that locks lease rows (Dialect.LeaseTx).
func (s Statements) LeaseTx(ctx context.Context, db *sql.DB, idle time.Duration, fn func(tx *sql.Tx) error) error {
	return s.d.LeaseTx(ctx, db, idle, fn)
}

func (s Statements) q(query string, args ...any) Query {
	return Query{SQL: s.d.Rebind(query), Args: args}
}

func (s Statements) nowArg() any { return s.d.TimeArg(s.now()) }
