package testsupport

import (
	"database/sql"
	"testing"

	"github.com/outboxkit/outboxkit/outbox"
)

// RecordedVersions returns how many times each version is recorded in table, a migrations
// table (version column): a migration run more than once shows as a count above 1.
func RecordedVersions(t testing.TB, db *sql.DB, table string) map[int]int {
	t.Helper()
	rows, err := db.Query("SELECT version, COUNT(*) FROM " + table + " GROUP BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int]int{}
	for rows.Next() {
		var v, n int
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		got[v] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// CheckVersionsOnce fails the test unless table (a migrations table) records each of
// migrations exactly once and no other version.
func CheckVersionsOnce(t testing.TB, db *sql.DB, table string, migrations []outbox.Migration) {
	t.Helper()
	got := RecordedVersions(t, db, table)
	if len(got) != len(migrations) {
		t.Errorf("recorded versions %v, want the %d embedded ones", got, len(migrations))
	}
	for _, m := range migrations {
		if got[m.Version] != 1 {
			t.Errorf("version %d (%s) recorded %d times, want once", m.Version, m.Name, got[m.Version])
		}
	}
}
