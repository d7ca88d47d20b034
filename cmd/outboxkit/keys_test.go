package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// keys list|skip|replay|discard, dead-letters show|groups and the list filters against
// PostgreSQL: two keys dead with one cause, one key retrying with another.
func TestKeysAndDeadLetterActions(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_keys")
	topic := testsupport.UniqueName("cli.keys")
	dropTables(t, db, table)
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, ""))
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	ids := writeEvents(t, db, table, topic, 6) // keys order-0 (ids 0, 3), order-1 (1, 4), order-2 (2, 5)
	for _, u := range []struct {
		i             int
		status, tries int
		next, lastErr string
	}{
		{0, 2, 5, "now()", "kafka: message 123 is too large (5000001 bytes)"},
		{1, 2, 1, "now()", "kafka: message 456 is too large (7000002 bytes)"},
		{2, 0, 3, "now() + interval '1 hour'", "dial tcp 10.1.2.3:9092: connection refused"},
	} {
		if _, err := db.Exec("UPDATE "+table+" SET status = $1, attempts = $2, next_attempt_at = "+u.next+", last_error = $3 WHERE event_id = $4",
			u.status, u.tries, u.lastErr, ids[u.i]); err != nil {
			t.Fatal(err)
		}
	}
	if res := cli(t, dir, "status"); res.code != 0 || !strings.Contains(res.stdout, "blocked keys: 3 (2 dead, 1 retrying)") {
		t.Errorf("status does not count the blocked keys: %s", res)
	}
	var keys []adminapi.BlockedKeyView
	decodeCLI(t, cli(t, dir, "keys", "list", "--json"), &keys)
	if len(keys) != 3 || keys[2].State != "retrying" || keys[2].Key.AggregateID != "order-2" || keys[2].Waiting != 1 ||
		keys[2].NextAttempt == nil || keys[0].Head.EventID != ids[0].String() || keys[0].State != "dead" {
		t.Fatalf("keys list --json = %+v", keys)
	}
	if res := cli(t, dir, "keys", "list"); res.code != 0 || !strings.Contains(grepLines(res.stdout, "order/order-2"), "retrying") {
		t.Errorf("keys list: %s", res)
	}
	var detail adminapi.EventDetailView
	decodeCLI(t, cli(t, dir, "dead-letters", "show", ids[0].String(), "--json"), &detail)
	if detail.Payload == nil || *detail.Payload != `{"n":0}` || detail.State != "dead" || detail.Attempts != 5 {
		t.Errorf("dead-letters show --json = %+v", detail)
	}
	if res := cli(t, dir, "dead-letters", "show", ids[0].String()); res.code != 0 || !strings.Contains(res.stdout, `{"n":0}`) {
		t.Errorf("dead-letters show: %s", res)
	}
	var groups []adminapi.GroupView
	decodeCLI(t, cli(t, dir, "dead-letters", "groups", "--json"), &groups)
	if len(groups) != 2 || groups[0].DeadLetters != 2 || groups[0].Normalised != "kafka: message <n> is too large (<n> bytes)" ||
		groups[1].BlockedKeys != 1 {
		t.Fatalf("dead-letters groups --json = %+v", groups)
	}
	if res := cli(t, dir, "dead-letters", "list", "--error", "TOO LARGE", "--since", "1h"); res.code != 0 ||
		!strings.Contains(res.stdout, ids[0].String()) || !strings.Contains(res.stdout, ids[1].String()) {
		t.Errorf("dead-letters list --error: %s", res)
	}
	if res := cli(t, dir, "dead-letters", "list", "--key", "order/order-2"); res.code != 0 || !strings.Contains(res.stdout, "no dead letters") {
		t.Errorf("dead-letters list --key of the retrying key: %s", res)
	}
	checkKeyActions(t, dir, ids[2].String(), groups[0].Fingerprint, func(q string, args ...any) int { return count(t, db, q, args...) }, table)
}

func checkKeyActions(t *testing.T, dir, retrying, group string, count func(string, ...any) int, table string) {
	t.Helper()
	if res := cli(t, dir, "keys", "skip", "--key", "order/order-2", "--dry-run"); res.code != 0 ||
		!strings.Contains(res.stdout, "would skip 1 events") || !strings.Contains(res.stdout, retrying) {
		t.Errorf("keys skip --dry-run: %s", res)
	}
	if n := count("SELECT COUNT(*) FROM "+table+" WHERE event_id = $1 AND status = 0", retrying); n != 1 {
		t.Fatalf("the dry run changed the head")
	}
	var action adminapi.ActionView
	decodeCLI(t, cli(t, dir, "keys", "skip", "--key", "order/order-2", "--json"), &action)
	if action.Applied != 1 || action.DryRun || count("SELECT COUNT(*) FROM "+table+" WHERE event_id = $1 AND status = 3", retrying) != 1 {
		t.Errorf("keys skip: %+v", action)
	}
	// status counts the skipped head (status 3) in its own column, in the table and in JSON.
	if res, fields := cli(t, dir, "status"), []string(nil); res.code != 0 || !strings.Contains(res.stdout, "SKIPPED") ||
		func() bool {
			fields = strings.Fields(grepLines(res.stdout, "cli.keys"))
			return len(fields) < 5 || fields[4] != "1"
		}() {
		t.Errorf("status after a skip, want SKIPPED 1: %s", res)
	}
	var status []topicStatusJSON
	decodeCLI(t, cli(t, dir, "status", "--json"), &status)
	if len(status) != 1 || status[0].Skipped != 1 {
		t.Errorf("status --json after a skip: %+v, want skipped 1", status)
	}
	decodeCLI(t, cli(t, dir, "keys", "replay", "--group", group, "--dry-run", "--json"), &action)
	if !action.DryRun || action.Matched != 2 || action.Applied != 0 {
		t.Errorf("keys replay --group --dry-run: %+v", action)
	}
	if res := cli(t, dir, "keys", "discard", "--group", group); res.code != 0 || !strings.Contains(res.stdout, "discarded 2 of 2 events") {
		t.Errorf("keys discard --group: %s", res)
	}
	if n := count("SELECT COUNT(*) FROM " + table + " WHERE status = 2"); n != 0 {
		t.Errorf("%d dead letters left after discarding their group", n)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "skip"}, "select the keys with --key"},
		{[]string{"keys", "skip", "--all", "--key", "order/o-1"}, "not both"},
		{[]string{"keys", "replay", "--key", "no-slash"}, "--key"},
		{[]string{"dead-letters", "list", "--since", "yesterday"}, "--since"},
		{[]string{"dead-letters", "show", "not-a-uuid"}, "not an event id"},
	} {
		if res := cli(t, dir, c.args...); res.code != 2 || !strings.Contains(res.stderr, c.want) {
			t.Errorf("%v: %s; want exit 2 naming %q", c.args, res, c.want)
		}
	}
	if res := cli(t, dir, "dead-letters", "show", "0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a"); res.code != 1 || !strings.Contains(res.stderr, "not in the outbox table") {
		t.Errorf("dead-letters show of an unknown id: %s", res)
	}
}

func decodeCLI(t *testing.T, res result, v any) {
	t.Helper()
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res)
	}
	if err := json.Unmarshal([]byte(res.stdout), v); err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
}
