package outbox_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The adoption's golden test: every statement `outboxkit adopt --dry-run` and `--undo` print for
// seed 004's table, rendered against each database's real catalog with fixed names, compared
// with testdata/adopt_<dialect>.sql. A change of the rendered SQL made on purpose regenerates
// them (go test ./outbox -run TestAdoptGolden -update-golden) and says why in its commit.

var updateAdoptGolden = flag.Bool("update-golden", false, "rewrite testdata/adopt_<dialect>.sql from the statements rendered")

// goldenTeamSchema holds the golden test's team table (and, on MariaDB/MySQL, its relay table,
// so that the SQL does not depend on the DSN's database).
const goldenTeamSchema = "golden_adopt_team"

func TestAdoptGolden(t *testing.T) {
	forEachAdoptDialect(t, func(t *testing.T, d outbox.Dialect) {
		got := renderAdoptStatements(t, d)
		path := filepath.Join("testdata", "adopt_"+string(d)+".sql")
		if *updateAdoptGolden {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update-golden to create it)", err)
		}
		if got != string(want) {
			t.Errorf("the adoption's statements differ from %s (go test ./outbox -run 'TestAdoptGolden/%s' -update-golden && git diff %s)", path, d, path)
		}
	})
}

// renderAdoptStatements creates seed 004's table in goldenTeamSchema and renders the plan of its
// adoption and the undo's statements.
func renderAdoptStatements(t *testing.T, d outbox.Dialect) string {
	t.Helper()
	db, schema, table, relayName := testsupport.OpenPostgres, `"`+goldenTeamSchema+`"`, testsupport.Seed004Postgres, "golden_relay"
	create, drop := "CREATE SCHEMA "+schema, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"
	if d == outbox.MySQL {
		db, schema, table, relayName = testsupport.OpenMySQL, "`"+goldenTeamSchema+"`", seed004TableMySQL, goldenTeamSchema+".golden_relay"
		create, drop = "CREATE DATABASE "+schema, "DROP DATABASE IF EXISTS "+schema
	}
	conn := db(t)
	for _, stmt := range []string{drop, create, fmt.Sprintf(table, schema+".outbox_events")} {
		if _, err := conn.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = conn.Exec(drop) })
	relay, err := outbox.NewTable(d, relayName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := seed004Mapping
	cfg.Schema = goldenTeamSchema
	plan, err := outbox.PlanAdopt(context.Background(), conn, relay, cfg)
	if err != nil {
		t.Fatal(err)
	}
	undo, err := outbox.UnadoptStatements(relay, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	section := func(title string, stmts []string) {
		fmt.Fprintf(&b, "-- %s\n", title)
		for _, s := range stmts {
			b.WriteString(strings.TrimSpace(s) + ";\n")
		}
	}
	section("install", plan.Install)
	section(fmt.Sprintf("backfill (%v)", plan.BackfillArgs), []string{plan.Backfill})
	if plan.Unlock != "" {
		section("unlock", []string{plan.Unlock})
	}
	section("undo --drop-relay-table", undo)
	return b.String()
}
