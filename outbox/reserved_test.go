package outbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// A table or schema name that is a reserved word is refused before any SQL runs: before, a
// PostgreSQL migration of table "select" created select_migrations and then failed.
func TestReservedWordTableNamesAreRefused(t *testing.T) {
	for _, name := range []string{"select", "Order", "app.table", "user.outbox"} {
		_, err := outbox.NewTable(outbox.Postgres, name)
		if !errors.Is(err, outbox.ErrInvalidIdentifier) || !strings.Contains(err.Error(), "reserved word") {
			t.Errorf("NewTable(%q) = %v, want ErrInvalidIdentifier naming the reserved word", name, err)
		}
	}
	for _, name := range []string{"outbox_events", "selected", "orders", "app.outbox", "select_events"} {
		if _, err := outbox.NewTable(outbox.MySQL, name); err != nil {
			t.Errorf("NewTable(%q): %v", name, err)
		}
	}
	db := testsupport.OpenPostgres(t)
	if _, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: "select"}); err == nil {
		t.Fatal("a writer on table select was made")
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE 'select%'").Scan(&n); err != nil || n != 0 {
		t.Errorf("tables named select*: %d (%v)", n, err)
	}
}
