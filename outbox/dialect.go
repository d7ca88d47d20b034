package outbox

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dialect names the SQL database flavour of an outbox table.
type Dialect string

// The supported dialects.
const (
	// Postgres is PostgreSQL 14 or newer (the notify trigger uses CREATE OR REPLACE TRIGGER),
	// through database/sql (pgx's stdlib driver) or native pgx. The tests run PostgreSQL 15.
	Postgres Dialect = "postgres"
	// MySQL is MariaDB or MySQL through go-sql-driver/mysql (parseTime=true is not needed). The
	// tests run MariaDB 10.11; MySQL 8 is expected to work but is not tested.
	MySQL Dialect = "mysql"
	// SQLite is SQLite 3 through the pure-Go modernc.org/sqlite driver: the embedded default.
	SQLite Dialect = "sqlite"
)

// ParseDialect accepts a dialect name or a common alias (postgresql, pgx, mariadb, sqlite3).
func ParseDialect(name string) (Dialect, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "postgres", "postgresql", "pgx", "pg":
		return Postgres, nil
	case "mysql", "mariadb":
		return MySQL, nil
	case "sqlite", "sqlite3":
		return SQLite, nil
	}
	return "", fmt.Errorf("outbox: unknown dialect %q (want postgres, mysql or sqlite)", name)
}

// Validate reports whether d is one of the supported dialects.
func (d Dialect) Validate() error {
	switch d {
	case Postgres, MySQL, SQLite:
		return nil
	}
	return fmt.Errorf("outbox: unknown dialect %q (want postgres, mysql or sqlite)", string(d))
}

// Rebind rewrites the ? placeholders of query into the dialect's own ($1, $2... for PostgreSQL).
// outboxkit's queries contain no literal question marks.
func (d Dialect) Rebind(query string) string {
	if d != Postgres {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// sqliteTimeLayout is fixed-width so that SQLite's text comparison orders times correctly.
const sqliteTimeLayout = "2006-01-02 15:04:05.000000"

// TimeArg converts t into the value the dialect stores in a timestamp column.
func (d Dialect) TimeArg(t time.Time) any {
	if d == SQLite {
		return t.UTC().Format(sqliteTimeLayout)
	}
	return t.UTC()
}

// TimeScanner returns a destination for Scan that accepts every dialect's timestamp
// representation (a time, or the text SQLite stores), and a function returning the scanned time
// in UTC (zero for NULL).
func TimeScanner() (dest any, get func() (time.Time, error)) {
	var raw any
	return &raw, func() (time.Time, error) { return parseTime(raw) }
}

func parseTime(raw any) (time.Time, error) {
	switch v := raw.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		return v.UTC(), nil
	case []byte:
		return parseTimeText(string(v))
	case string:
		return parseTimeText(v)
	}
	return time.Time{}, fmt.Errorf("outbox: cannot read %T as a time", raw)
}

func parseTimeText(s string) (time.Time, error) {
	for _, layout := range []string{sqliteTimeLayout, "2006-01-02 15:04:05.999999999", time.RFC3339Nano,
		"2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("outbox: cannot parse time %q", s)
}
