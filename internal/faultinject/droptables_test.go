package faultinject

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// A run's cleanup leaves none of the functions the PostgreSQL migrations create beside its
// outbox table (dropping the table keeps them: the shared test database gathered hundreds).
func TestDroppedTablesLeaveNoFunctions(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	ctx := context.Background()
	name := fmt.Sprintf("fault_fn_%d", time.Now().UnixNano()%1e9)
	table, err := outbox.NewTable(outbox.Postgres, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM pg_proc WHERE proname LIKE $1", name+`\_%`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n == 0 {
		t.Fatalf("the migrations created no function named %s_*: the test checks nothing", name)
	}
	e := &env{cfg: Config{Dialect: outbox.Postgres}, db: db}
	e.dropTables(&installation{table: table, keysTable: name + "_keys"})
	if n := count(); n != 0 {
		t.Fatalf("%d functions named %s_* left after the run's cleanup", n, name)
	}
}
