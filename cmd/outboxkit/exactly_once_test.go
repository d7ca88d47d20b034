package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestRelayExactlyOnce: `outboxkit relay` with forwarder.delivery exactly_once relays a backlog
// to the real Kafka, and `outboxkit status` then shows the mode and the units' last
// checkpoints; on both sources (with cdc, the backlog is drained when the slot is created, and
// status shows the slot too).
func TestRelayExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, source := range []string{"polling", "cdc"} {
		t.Run(source, func(t *testing.T) {
			t.Parallel()
			relayExactlyOnce(t, source)
		})
	}
}

func relayExactlyOnce(t *testing.T, source string) {
	db := testsupport.OpenPostgres(t)
	brokers := testsupport.KafkaBrokers(t)
	table := testsupport.UniqueName("cli_eo")
	topic := testsupport.UniqueName("cli.eo")
	const checkpoints = "outboxkit-test.checkpoints" // shared by the tests, as in brokers/kafka
	dropTables(t, db, table)
	var tbl outbox.Table
	if source == "cdc" {
		tbl = cdcTable(t, db, table)
	}
	config := pgConfig(testsupport.PostgresDSN(t), table, fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n", strings.Join(brokers, ", ")))
	config = strings.Replace(config, "forwarder:\n", "forwarder:\n  source: "+source+"\n  delivery: exactly_once\n  checkpoint_topic: "+checkpoints+"\n", 1)
	dir := writeConfig(t, config)
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	ids := writeEvents(t, db, table, topic, 8)
	p := startRelay(t, dir)
	p.waitLog(t, "forwarder started")
	consume(t, brokers, topic, ids)
	if code := p.stop(t); code != 0 {
		t.Fatalf("relay exited with %d, want 0; its log:\n%s", code, p.log())
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 0 {
		t.Errorf("%d rows left in the outbox", n)
	}
	res := cli(t, dir, "status")
	if res.code != 0 {
		t.Fatalf("status: %s", res)
	}
	t.Logf("status:\n%s", res.stdout)
	if !strings.Contains(res.stdout, "delivery: exactly_once (checkpoints in topic "+checkpoints+")") {
		t.Errorf("status does not show the delivery mode:\n%s", res.stdout)
	}
	var installation string
	if err := db.QueryRow("SELECT installation_id FROM " + table + "_installation").Scan(&installation); err != nil {
		t.Fatalf("read the installation made by migrate: %v", err)
	}
	units, withCheckpoint := 0, 0
	for _, line := range strings.Split(res.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], "outboxkit/"+installation+"/"+table+"/default/u") {
			continue
		}
		units++
		if f[2] != "-" {
			withCheckpoint++
		}
	}
	if units != 2 || withCheckpoint == 0 {
		t.Errorf("status lists %d units (want 2, the default), %d with a checkpoint (want at least 1):\n%s", units, withCheckpoint, res.stdout)
	}
	if source == "cdc" {
		if slot := testsupport.CDCSlot(t, db, tbl, "default"); grepLines(res.stdout, slot) == "" {
			t.Errorf("status does not show the slot %s:\n%s", slot, res.stdout)
		}
	}
}
