package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// cliWithInput is cli with stdin and extra environment entries.
func cliWithInput(t *testing.T, dir, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	default:
		t.Fatalf("running outboxkit %v: %v", args, err)
	}
	return res
}

// `outboxkit relay` with forwarder.source cdc (set through OUTBOXKIT_FORWARDER_SOURCE) streams
// the table into Kafka; `status` shows the slot; `cdc drop-slot` asks first, refuses a slot
// being streamed without --terminate, and drops it with it; the relay says so, recreates the
// slot, and events keep flowing.
func TestRelayCDC(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	dsn := testsupport.PostgresDSN(t)
	brokers := testsupport.KafkaBrokers(t)
	table := testsupport.UniqueName("cli_cdc")
	topic := testsupport.UniqueName("cli.cdc")
	dropTables(t, db, table)
	tbl := cdcTable(t, db, table)
	dir := writeConfig(t, pgConfig(dsn, table, fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n", strings.Join(brokers, ", "))))
	env := []string{"OUTBOXKIT_FORWARDER_SOURCE=cdc"}
	p := startRelayWithEnv(t, dir, env, "--migrate")
	p.waitLog(t, "cdc: streaming")
	slot := testsupport.CDCSlot(t, db, tbl, "default") // named after the installation made by --migrate
	ids := writeEvents(t, db, table, topic, 5)
	consume(t, brokers, topic, ids)

	res := cliWithInput(t, dir, "", env, "status")
	if res.code != 0 || !strings.Contains(grepLines(res.stdout, slot), "streaming (walsender PID") {
		t.Fatalf("status lacks the streaming slot %s: %s", slot, res)
	}
	res = cliWithInput(t, dir, "", env, "cdc", "slots", "--json")
	var slots []adminapi.SlotView
	if err := json.Unmarshal([]byte(res.stdout), &slots); res.code != 0 || err != nil {
		t.Fatalf("cdc slots --json: %v: %s", err, res)
	}
	if pub := testsupport.CDCPublication(t, db, tbl); len(slots) != 1 || slots[0].Publication != pub {
		t.Fatalf("cdc slots --json = %+v, want one slot of the publication %s", slots, pub)
	}
	if len(slots) != 1 || slots[0].Name != slot || slots[0].LeaseGroup != "default" || !slots[0].Active ||
		slots[0].ActivePID == 0 || slots[0].Missing || slots[0].WALStatus != "reserved" || !slots[0].Drained {
		t.Fatalf("cdc slots --json while streaming = %+v, want slot %s of group default, active, reserved, drained", slots, slot)
	}
	if res = cliWithInput(t, dir, "n\n", env, "cdc", "drop-slot"); res.code == 0 || !strings.Contains(res.stderr, "not confirmed") {
		t.Fatalf("drop-slot answered no: %s", res)
	}
	if res = cliWithInput(t, dir, "", env, "cdc", "drop-slot", "--yes"); res.code == 0 || !strings.Contains(res.stderr, "--terminate") {
		t.Fatalf("drop-slot of a streamed slot without --terminate: %s", res)
	}
	if res = cliWithInput(t, dir, "y\n", env, "cdc", "drop-slot", "--terminate"); res.code != 0 || !strings.Contains(res.stdout, "dropped replication slot "+slot) {
		t.Fatalf("drop-slot --terminate: %s", res)
	}
	p.waitLog(t, "cdc: the replication slot is gone (dropped while in use): recreating it; "+
		"the events it missed are in the table and are drained from there")
	ids = append(ids, writeEvents(t, db, table, topic, 4)...)
	consume(t, brokers, topic, ids)
	if code := p.stop(t); code != 0 {
		t.Fatalf("relay exited with %d after SIGTERM; its log:\n%s", code, p.log())
	}
	res = cliWithInput(t, dir, "", env, "status")
	if res.code != 0 || !strings.Contains(grepLines(res.stdout, slot), "idle (no relay streams it)") {
		t.Fatalf("status after the relay stopped: %s", res)
	}
	if res = cliWithInput(t, dir, "", env, "cdc", "slots"); res.code != 0 || !strings.Contains(grepLines(res.stdout, slot), "idle (no relay streams it)") {
		t.Fatalf("cdc slots after the relay stopped: %s", res)
	}
}

// cdc slots on a database without the cdc source says so and names the dialect.
func TestCDCSlotsNeedsPostgres(t *testing.T) {
	t.Parallel()
	dir := writeConfig(t, "database:\n  dialect: sqlite\n  dsn: outbox.db\n")
	res := cli(t, dir, "cdc", "slots", "--json")
	if res.code != 2 || !strings.Contains(res.stderr, "needs PostgreSQL, and database.dialect is sqlite") {
		t.Fatalf("cdc slots on sqlite: %s", res)
	}
}

// cdcTable returns the outbox table named table on PostgreSQL and the name of its default lease
// group's slot; the slot (its walsender ended first), the publication and the slots table are
// dropped with the test.
func cdcTable(t *testing.T, db *sql.DB, table string) outbox.Table {
	t.Helper()
	tbl, err := outbox.NewTable(outbox.Postgres, table)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The slot's name includes the table's installation: read while the table exists.
		if id, err := outbox.ReadInstallation(context.Background(), db, tbl); err == nil {
			if slot, err := tbl.Slot(id, "default"); err == nil {
				_, _ = db.Exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
			}
		}
		testsupport.DropCDCObjects(t, db, tbl)
	})
	return tbl
}

// The slot lines end with a STALLED? line when pending rows not on the retry path have waited
// longer than the stall bound (forwarder.DefaultCDCStallAfter), and with none otherwise.
func TestPrintSlotsSaysStalled(t *testing.T) {
	slot := admin.SlotStatus{Name: "obk_ordersoutbox_bacf4ec2", LeaseGroup: "default", Active: true, ActivePID: 42,
		WALStatus: "reserved", Drained: true, Waiting: 600, OldestWaiting: 95 * time.Second}
	var out strings.Builder
	if err := printSlots(&out, []admin.SlotStatus{slot}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "STALLED? 600 pending rows not on the retry path, the oldest waiting for 1m35s (over 30s)") {
		t.Fatalf("slot lines with 600 rows waiting for 95s lack the STALLED? line:\n%s", out.String())
	}
	slot.OldestWaiting = 5 * time.Second
	out.Reset()
	if err := printSlots(&out, []admin.SlotStatus{slot}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "STALLED?") {
		t.Fatalf("rows waiting for 5s are reported as stalled:\n%s", out.String())
	}
}
