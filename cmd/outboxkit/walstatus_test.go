package main

import (
	"context"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// `outboxkit status` with forwarder.source wal prints the wal source's section: the configured
// slot (idle, usable), the server's and the confirmed positions with the lag, and the parked keys
// with their rows; a slot dropped behind outboxkit's back is shown LOST.
func TestStatusShowsTheWALSource(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_walstatus")
	slot := testsupport.UniqueName("cli_walstatus")
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
	config := strings.Replace(pgConfig(testsupport.PostgresDSN(t), table, "broker: kafka\nkafka:\n  brokers: [127.0.0.1:1]\n"),
		"forwarder:\n", "forwarder:\n  source: wal\n  wal_slot: "+slot+"\n", 1)
	dir := writeConfig(t, config)
	if res := cliWithInput(t, dir, "", nil, "migrate", "--wal-slot", slot); res.code != 0 {
		t.Fatalf("migrate --wal-slot: %s", res)
	}
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	var events []outbox.Event
	for range 3 {
		events = append(events, outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: "p", EventType: "Parked", Payload: []byte("{}")})
	}
	if err := testsupport.WriteEvents(context.Background(), db, w, events...); err != nil {
		t.Fatal(err)
	}
	res := cliWithInput(t, dir, "", nil, "status")
	t.Logf("status:\n%s", res.stdout)
	for _, want := range []string{"wal slot " + slot + ": idle (no relay streams it), usable, wal_status ", "confirmed ", "(lag ",
		"parked keys: 1", "order/p  3     0"} {
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Errorf("want %q in the output of status: %s", want, res)
		}
	}
	if _, err := db.Exec("SELECT pg_drop_replication_slot($1)", slot); err != nil {
		t.Fatal(err)
	}
	if res := cliWithInput(t, dir, "", nil, "status"); res.code != 0 || !strings.Contains(res.stdout, "LOST: writers are refused") {
		t.Errorf("want the lost slot shown: %s", res)
	}
}
