package main

import (
	"bytes"
	"context"
	"database/sql"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestWALExample runs the whole demo on the test services' PostgreSQL (CI=true: unreachable is a
// failure) and checks its story: both committed orders reach the broker, the rolled-back o-2
// never does, the outbox table holds no row, and the run's slot and publication are gone after.
func TestWALExample(t *testing.T) {
	dsn := testsupport.PostgresDSN(t)
	var out bytes.Buffer
	err := run(context.Background(), &out, dsn)
	got := out.String()
	t.Log("\n" + got)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, id := range []string{"o-1", "o-3"} {
		delivered := regexp.MustCompile(`broker delivered: key ` + id + ` value \{"order_id":"` + id + `"`)
		if n := len(delivered.FindAllString(got, -1)); n != 1 {
			t.Errorf("order %s delivered %d times in the output, want 1", id, n)
		}
	}
	if strings.Contains(got, "key o-2") {
		t.Error("the rolled-back order o-2 reached the broker")
	}
	if !strings.Contains(got, "order o-2 rolled back") {
		t.Error("missing the rolled-back order line")
	}
	if !regexp.MustCompile(`rows in the outbox table \w+: 0\n`).MatchString(got) {
		t.Error("the outbox table is not reported empty")
	}
	m := regexp.MustCompile(`slot (wal_example_[0-9a-f]{8}), its publication and the run's tables dropped`).FindStringSubmatch(got)
	if m == nil {
		t.Fatal("missing the cleanup line")
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var slots, pubs int
	if err := db.QueryRow("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", m[1]).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(*) FROM pg_publication WHERE pubname = $1", m[1]).Scan(&pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Errorf("after the run: %d replication slots and %d publications named %s, want 0", slots, pubs, m[1])
	}
}
