package main

import (
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// `outboxkit migrate --wal-slot` creates and registers the wal slot; `wal-slot show` reports it;
// once the slot is dropped behind outboxkit's back, show and create fail naming it and pointing at
// reset (create does not re-create it), reset asks first and then replaces it, and drop retires
// it.
func TestWALSlotCommands(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_walslot")
	slot := testsupport.UniqueName("cli_walslot")
	tbl, err := outbox.NewTable(outbox.Postgres, table)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
		_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + slot)
		for _, name := range tbl.Tables() {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + name + " CASCADE")
		}
	})
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, "broker: kafka\nkafka:\n  brokers: [127.0.0.1:1]\n"))
	run := func(stdin string, args ...string) result {
		t.Helper()
		return cliWithInput(t, dir, stdin, nil, args...)
	}
	expect := func(res result, code int, want ...string) {
		t.Helper()
		if res.code != code {
			t.Fatalf("want exit %d: %s", code, res)
		}
		for _, w := range want {
			if !strings.Contains(res.stdout+res.stderr, w) {
				t.Errorf("want %q in the output: %s", w, res)
			}
		}
	}
	expect(run("", "migrate", "--wal-slot", slot), 0, "replication slot "+slot+" created and registered for outbox "+table)
	publication := func() bool {
		t.Helper()
		var n int
		if err := db.QueryRow("SELECT count(*) FROM pg_publication WHERE pubname = $1", slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if !publication() {
		t.Fatalf("migrate --wal-slot %s created no publication %s, which the relay streams with", slot, slot)
	}
	expect(run("", "wal-slot", "create", slot), 0, "replication slot "+slot+" is registered")
	expect(run("", "wal-slot", "show", slot), 0, "registered true, exists true")
	expect(run("", "wal-slot", "reset", slot, "--yes"), 1, "is usable")

	if _, err := db.Exec("SELECT pg_drop_replication_slot($1)", slot); err != nil {
		t.Fatal(err)
	}
	lost := []string{`"` + slot + `"`, "does not exist in this database", "outboxkit wal-slot reset " + slot}
	expect(run("", "wal-slot", "show", slot), 1, lost...)
	expect(run("", "wal-slot", "create", slot), 1, lost...)
	expect(run("n\n", "wal-slot", "reset", slot), 2, "not confirmed")
	expect(run("y\n", "wal-slot", "reset", slot), 0, "replaced; writers may emit again")
	expect(run("", "wal-slot", "show", slot), 0, "registered true, exists true")
	expect(run("", "wal-slot", "drop", slot, "--yes"), 0, "dropped and unregistered")
	if publication() {
		t.Errorf("wal-slot drop %s left the publication %s that create made", slot, slot)
	}
	expect(run("", "wal-slot", "show", slot), 0, "registered false, exists false")
	expect(run("", "wal-slot", "show", "Bad-Name"), 2, `replication slot name "Bad-Name"`)
}
