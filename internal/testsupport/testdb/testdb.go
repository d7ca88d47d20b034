// Package testdb opens the test database of a dialect for tests that run on each of them: the
// real PostgreSQL or MariaDB of scripts/services.sh, or a SQLite file of the test's own. It is
// apart from testsupport so that only the tests that use SQLite link its driver.
package testdb

import (
	"database/sql"
	"path/filepath"
	"testing"

	// The SQLite driver Open opens.
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// Open opens the test database of dialect: testsupport.OpenPostgres or testsupport.OpenMySQL,
// or (any other dialect) a SQLite file in WAL mode in the test's temporary directory, closed
// when the test ends.
func Open(t testing.TB, dialect outbox.Dialect) *sql.DB {
	t.Helper()
	switch dialect {
	case outbox.Postgres:
		return testsupport.OpenPostgres(t)
	case outbox.MySQL:
		return testsupport.OpenMySQL(t)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+
		"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// WAL once, on one connection (it persists in the file), not as a DSN pragma that every new
	// connection runs: connections opened at once could fail with SQLITE_BUSY at connect.
	if _, err := db.Exec("PRAGMA journal_mode=WAL"); err != nil {
		t.Fatal(err)
	}
	return db
}
