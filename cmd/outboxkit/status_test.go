package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestStatusAndDeadLetters runs status and the dead-letters commands (list, replay, discard) on a
// PostgreSQL outbox of 5 events, 3 of them dead-lettered by hand.
func TestStatusAndDeadLetters(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_dead")
	topic := testsupport.UniqueName("cli.dead")
	dropTables(t, db, table)
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, ""))
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	if res := cli(t, dir, "status"); res.code != 0 || !strings.Contains(res.stdout, "the outbox is empty") {
		t.Fatalf("status of an empty outbox: %s", res)
	}
	// A table that was never migrated: exit 1, pointing at the migrate command.
	missing := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), testsupport.UniqueName("cli_missing"), ""))
	if res := cli(t, missing, "dead-letters", "list"); res.code != 1 || !strings.Contains(res.stderr, "run `outboxkit migrate`") {
		t.Errorf("dead-letters list on a missing table: %s", res)
	}
	ids := writeEvents(t, db, table, topic, 5)
	// Dead-letter three of them by hand, as the forwarder would after its last attempt.
	for i, id := range ids[:3] {
		if _, err := db.Exec("UPDATE "+table+" SET status = 2, attempts = 10, last_error = $1 WHERE event_id = $2",
			fmt.Sprintf("kafka: broker said no (%d)", i), id); err != nil {
			t.Fatal(err)
		}
	}

	checkStatusOfDeadLetters(t, dir, topic)
	checkDeadLettersList(t, dir, topic, ids)
	checkDeadLetterActions(t, db, dir, table, ids)
}

// checkStatusOfDeadLetters checks status and status --json on topic's 5 events, 3 of them dead.
func checkStatusOfDeadLetters(t *testing.T, dir, topic string) {
	res := cli(t, dir, "status")
	if res.code != 0 {
		t.Fatalf("status: %s", res)
	}
	if !strings.Contains(res.stdout, "TOPIC") || !strings.Contains(res.stdout, "OLDEST") {
		t.Errorf("status has no table header: %s", res)
	}
	if fields := strings.Fields(grepLines(res.stdout, topic)); len(fields) != 6 || fields[1] != "2" || fields[2] != "0" || fields[3] != "3" || fields[4] != "0" {
		t.Errorf("status row = %q, want %s 2 0 3 0 <age>", fields, topic)
	}
	res = cli(t, dir, "status", "--json")
	var status []topicStatusJSON
	if err := json.Unmarshal([]byte(res.stdout), &status); err != nil || res.code != 0 {
		t.Fatalf("status --json: %v\n%s", err, res)
	}
	if len(status) != 1 || status[0].Topic != topic || status[0].Pending != 2 || status[0].Dead != 3 ||
		status[0].OldestPending == nil || status[0].OldestPendingAgeSeconds == nil || *status[0].OldestPendingAgeSeconds < 0 {
		t.Errorf("status --json = %+v", status)
	}
}

// checkDeadLettersList checks dead-letters list (text, and --json --limit 2) on topic's events,
// the first 3 of ids dead with the errors TestStatusAndDeadLetters wrote.
func checkDeadLettersList(t *testing.T, dir, topic string, ids []uuid.UUID) {
	res := cli(t, dir, "dead-letters", "list")
	if res.code != 0 {
		t.Fatalf("dead-letters list: %s", res)
	}
	for i, id := range ids[:3] {
		line := grepLines(res.stdout, id.String())
		if !strings.Contains(line, topic) || !strings.Contains(line, fmt.Sprintf("broker said no (%d)", i)) || !strings.Contains(line, "order/order-") {
			t.Errorf("dead-letters list line of %s = %q", id, line)
		}
	}
	if strings.Contains(res.stdout, ids[3].String()) {
		t.Errorf("dead-letters list shows a pending event: %s", res)
	}
	res = cli(t, dir, "dead-letters", "list", "--json", "--limit", "2")
	var dead []deadLetterJSON
	if err := json.Unmarshal([]byte(res.stdout), &dead); err != nil || res.code != 0 {
		t.Fatalf("dead-letters list --json: %v\n%s", err, res)
	}
	if len(dead) != 2 || dead[0].EventID != ids[0].String() || dead[0].Attempts != 10 || dead[0].LastError != "kafka: broker said no (0)" {
		t.Errorf("dead-letters list --json --limit 2 = %+v", dead)
	}
}

// checkDeadLetterActions replays and discards dead letters among ids (the first 3 dead) by id
// and with --all, and checks the table after each.
func checkDeadLetterActions(t *testing.T, db *sql.DB, dir, table string, ids []uuid.UUID) {
	// replay: pending again, with fresh attempts; an id that is no dead letter is reported.
	res := cli(t, dir, "dead-letters", "replay", ids[0].String(), ids[3].String())
	if res.code != 0 || !strings.Contains(res.stdout, "replayed 1 of 2 events") || !strings.Contains(res.stderr, "1 of the given ids are not dead letters") {
		t.Errorf("dead-letters replay: %s", res)
	}
	var st, attempts int
	if err := db.QueryRow("SELECT status, attempts FROM "+table+" WHERE event_id = $1", ids[0]).Scan(&st, &attempts); err != nil {
		t.Fatal(err)
	}
	if st != 0 || attempts != 0 {
		t.Errorf("replayed event has status %d, attempts %d; want 0, 0", st, attempts)
	}
	// discard: gone for good.
	res = cli(t, dir, "dead-letters", "discard", ids[1].String())
	if res.code != 0 || !strings.Contains(res.stdout, "discarded 1 of 1 events") {
		t.Errorf("dead-letters discard: %s", res)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE event_id = $1", ids[1]); n != 0 {
		t.Errorf("discarded event still in the table")
	}
	// --all.
	if res = cli(t, dir, "dead-letters", "discard", "--all"); res.code != 2 || !strings.Contains(res.stderr, "--yes") {
		t.Errorf("discard --all without --yes: %s", res)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 2"); n != 1 {
		t.Errorf("discard --all without --yes changed the table: %d dead left, want 1", n)
	}
	if res = cli(t, dir, "dead-letters", "replay", "--all"); res.code != 0 || !strings.Contains(res.stdout, "replayed 1 dead letters") {
		t.Errorf("replay --all: %s", res)
	}
	if _, err := db.Exec("UPDATE "+table+" SET status = 2 WHERE event_id = ANY($1)", []string{ids[3].String(), ids[4].String()}); err != nil {
		t.Fatal(err)
	}
	if res = cli(t, dir, "dead-letters", "discard", "--all", "--yes"); res.code != 0 || !strings.Contains(res.stdout, "discarded 2 dead letters") {
		t.Errorf("discard --all --yes: %s", res)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 2 {
		t.Errorf("%d rows left, want the 2 replayed ones", n)
	}
	if res = cli(t, dir, "dead-letters", "list"); res.code != 0 || !strings.Contains(res.stdout, "no dead letters") {
		t.Errorf("dead-letters list when empty: %s", res)
	}
}

func TestMigratePrint(t *testing.T) {
	t.Parallel()
	// --print connects to nothing: the DSN points at a closed port.
	for dialect, want := range map[string]string{
		"postgres": "CREATE TABLE IF NOT EXISTS printed_events",
		"mysql":    "CREATE TABLE IF NOT EXISTS printed_events",
		"sqlite":   "CREATE TABLE IF NOT EXISTS printed_events",
	} {
		dir := writeConfig(t, fmt.Sprintf("database:\n  dialect: %s\n  dsn: x@tcp(%s)/db\n  table: printed_events\n", dialect, closedPort(t)))
		res := cli(t, dir, "migrate", "--print")
		if res.code != 0 || !strings.Contains(res.stdout, want) || !strings.Contains(res.stdout, "-- migration 1:") {
			t.Errorf("migrate --print (%s): %s", dialect, res)
		}
	}
}

func TestMigrateAndStatusSQLite(t *testing.T) {
	t.Parallel()
	dir := writeConfig(t, "database:\n  dialect: sqlite\n  dsn: outbox.db\n")
	for range 2 { // idempotent
		if res := cli(t, dir, "migrate"); res.code != 0 || !strings.Contains(res.stdout, "outbox table outbox_events is up to date (sqlite)") {
			t.Fatalf("migrate: %s", res)
		}
	}
	if res := cli(t, dir, "status", "--json"); res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
		t.Errorf("status --json on an empty outbox: %s", res)
	}
}

func TestMigrateAndStatusMySQL(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenMySQL(t)
	table := testsupport.UniqueName("cli_my")
	t.Cleanup(func() {
		for _, suffix := range []string{"", "_leases", "_relays", "_migrations", "_key_locks"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table + suffix)
		}
	})
	dir := writeConfig(t, fmt.Sprintf("database:\n  dialect: mariadb\n  dsn: %s\n  table: %s\n", testsupport.MySQLDSN(t), table))
	if res := cli(t, dir, "migrate"); res.code != 0 || !strings.Contains(res.stdout, "is up to date (mysql)") {
		t.Fatalf("migrate: %s", res)
	}
	ids := writeEventsIn(t, db, outbox.MySQL, table, "my.topic", 2)
	if _, err := db.Exec("UPDATE "+table+" SET status = 2, attempts = 3, last_error = 'boom' WHERE event_id = ?", ids[0].String()); err != nil {
		t.Fatal(err)
	}
	res := cli(t, dir, "dead-letters", "list", "--json")
	var dead []deadLetterJSON
	if err := json.Unmarshal([]byte(res.stdout), &dead); err != nil || res.code != 0 {
		t.Fatalf("dead-letters list --json: %v\n%s", err, res)
	}
	if len(dead) != 1 || dead[0].EventID != ids[0].String() || dead[0].LastError != "boom" || dead[0].Attempts != 3 {
		t.Errorf("dead letters on MySQL: %+v", dead)
	}
	res = cli(t, dir, "status")
	if fields := strings.Fields(grepLines(res.stdout, "my.topic")); res.code != 0 || len(fields) != 6 || strings.Join(fields[:5], " ") != "my.topic 1 0 1 0" {
		t.Errorf("status on MySQL: %s", res)
	}
	if res := cli(t, dir, "dead-letters", "replay", ids[0].String()); res.code != 0 || !strings.Contains(res.stdout, "replayed 1 of 1") {
		t.Errorf("replay on MySQL: %s", res)
	}
}
