package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestScheduledCommands runs status, scheduled list and scheduled cancel on a PostgreSQL outbox
// with three scheduled events, one of them already released by the relay (status 0).
func TestScheduledCommands(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_sched")
	topic := testsupport.UniqueName("cli.sched")
	dropTables(t, db, table)
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, ""))
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	if res := cli(t, dir, "status"); res.code != 0 || !strings.Contains(res.stdout, "scheduled: none") {
		t.Fatalf("status of an empty outbox: %s", res)
	}
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	next := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	var events []outbox.Event
	for i, at := range []time.Time{next.Add(time.Hour), next, next.Add(2 * time.Hour)} {
		e := outbox.Event{Topic: topic, AggregateType: "order", AggregateID: "o-" + string(rune('a'+i)), EventType: "Reminder", Payload: []byte("{}"), DeliverAt: at}
		events = append(events, e)
	}
	if err := testsupport.WriteEvents(context.Background(), db, w, events...); err != nil {
		t.Fatal(err)
	}
	released := events[2].ID
	if _, err := db.Exec("UPDATE "+table+" SET status = 0 WHERE event_id = $1", released); err != nil {
		t.Fatal(err)
	}

	res := cli(t, dir, "status")
	if want := "scheduled: 2, next due 2031-05-06 07:08:09 UTC"; res.code != 0 || !strings.Contains(res.stdout, want) {
		t.Fatalf("status lacks %q: %s", want, res)
	}
	res = cli(t, dir, "scheduled", "list", "--json")
	var listed []scheduledJSON
	if err := json.Unmarshal([]byte(res.stdout), &listed); err != nil || res.code != 0 {
		t.Fatalf("scheduled list --json: %v\n%s", err, res)
	}
	if len(listed) != 2 || listed[0].EventID != events[1].ID.String() || listed[1].EventID != events[0].ID.String() ||
		!listed[0].DeliverAt.Equal(next) || listed[0].Topic != topic {
		t.Fatalf("scheduled list --json = %+v, want %s (due %s) then %s", listed, events[1].ID, next, events[0].ID)
	}
	res = cli(t, dir, "scheduled", "list", "--limit", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "scheduled: 2") || !strings.Contains(res.stdout, events[1].ID.String()) ||
		strings.Contains(res.stdout, events[0].ID.String()) {
		t.Fatalf("scheduled list --limit 1: want the summary and %s only: %s", events[1].ID, res)
	}

	unknown := uuid.New()
	res = cli(t, dir, "scheduled", "cancel", events[1].ID.String(), released.String(), unknown.String())
	if res.code != 0 {
		t.Fatalf("scheduled cancel: %s", res)
	}
	for id, outcome := range map[uuid.UUID]string{events[1].ID: "cancelled", released: "released", unknown: "not found"} {
		if line := grepLines(res.stdout, id.String()); !strings.HasSuffix(strings.TrimSpace(line), outcome) {
			t.Errorf("scheduled cancel: the line of %s is %q, want it %s", id, line, outcome)
		}
	}
	res = cli(t, dir, "scheduled", "cancel", "--json", events[1].ID.String(), events[0].ID.String())
	var result scheduleResultJSON
	if err := json.Unmarshal([]byte(res.stdout), &result); err != nil || res.code != 0 {
		t.Fatalf("scheduled cancel --json: %v\n%s", err, res)
	}
	if len(result.Cancelled) != 1 || result.Cancelled[0] != events[0].ID.String() || len(result.NotFound) != 1 ||
		result.NotFound[0] != events[1].ID.String() || len(result.Released) != 0 {
		t.Errorf("scheduled cancel --json = %+v, want %s cancelled, %s (cancelled before) not found", result, events[0].ID, events[1].ID)
	}
	if res := cli(t, dir, "status"); !strings.Contains(res.stdout, "scheduled: none") {
		t.Errorf("status after the cancels: %s", res)
	}
}
