package outbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// Every function a PostgreSQL migration creates is in Table.Functions, which the adoption's undo
// and the fault runs drop: a migration that adds one and forgets the list fails here.
func TestFunctionsListEveryMigrationFunction(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("migrations", "postgres", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no PostgreSQL migrations found (%v)", err)
	}
	table, err := outbox.NewTable(outbox.Postgres, "fn_list")
	if err != nil {
		t.Fatal(err)
	}
	listed := strings.Join(table.Functions(), " ")
	created := regexp.MustCompile(`FUNCTION \{\{\.Events\}\}(_\w+)\(`)
	seen := 0
	for _, f := range files {
		sql, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range created.FindAllStringSubmatch(string(sql), -1) {
			seen++
			if !strings.Contains(listed, "fn_list"+m[1]+"(") {
				t.Errorf("%s creates fn_list%s, which Table.Functions does not list: %s", f, m[1], listed)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no CREATE FUNCTION found in the migrations: the test checks nothing")
	}
}

// Dropping Table.Functions after the tables leaves none of the migrated functions behind: the
// signatures match the catalog's (a wrong one is skipped silently by DROP FUNCTION IF EXISTS).
func TestFunctionsDropEveryMigratedFunction(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	ctx := context.Background()
	name := fmt.Sprintf("fn_drop_%d", time.Now().UnixNano()%1e9)
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
	for _, tbl := range table.Tables() {
		if _, err := db.Exec("DROP TABLE IF EXISTS " + tbl); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("DROP FUNCTION IF EXISTS " + strings.Join(table.Functions(), ", ")); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d functions named %s_* left after dropping Table.Functions", n, name)
	}
}
