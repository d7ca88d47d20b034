package outbox_test

// Tests of adopting a team's own outbox table (docs/adopting.md) on the real PostgreSQL and
// MariaDB: the table of seed 004, written by plain SQL, relayed by the forwarder through
// outboxkit's table. Each test runs as a subtest per database (forEachAdoptDialect).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestAdoptBackfillsOnceAndIsIdempotent: the pending rows at adoption are copied in created_at
// order, published ones are not, and a second adoption changes nothing and says so.
func TestAdoptBackfillsOnceAndIsIdempotent(t *testing.T) {
	forEachAdoptDialect(t, testAdoptBackfillsOnceAndIsIdempotent)
}

func testAdoptBackfillsOnceAndIsIdempotent(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	var ids []string
	for n := range 3 {
		id, err := a.insert(ctx, a.db, "Order", "o-1", n)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := a.db.Exec(a.q("UPDATE "+a.team+" SET status = 'PUBLISHED' WHERE id = ?"), ids[0]); err != nil {
		t.Fatal(err)
	}
	res, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if !res.Changed || res.Backfilled != 2 {
		t.Fatalf("first Adopt: %+v, want changed and 2 rows backfilled", res)
	}
	res, err = outbox.Adopt(ctx, a.db, a.relay, a.cfg)
	if err != nil || res.Changed || res.Backfilled != 0 {
		t.Fatalf("second Adopt: %+v, %v; want nothing changed", res, err)
	}
	var topic, headers, eventID string
	var payload []byte
	if err := a.db.QueryRow("SELECT topic, payload, headers, CAST(event_id AS CHAR(36)) FROM "+a.relay.Events()+" ORDER BY seq LIMIT 1").
		Scan(&topic, &payload, &headers, &eventID); err != nil {
		t.Fatal(err)
	}
	var body struct{ N int }
	if err := json.Unmarshal(payload, &body); err != nil || body.N != 1 || topic != "order.events" || eventID != ids[1] {
		t.Errorf("first relayed row: %s topic %q payload %s, want %s, order.events and n=1", eventID, topic, payload, ids[1])
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(headers), &got); err != nil || fmt.Sprint(got) != "map[n:1 source:order-service]" || got["n"] != "1" {
		t.Errorf("headers %s: want the reserved event_id dropped and the number carried as text", headers)
	}
}

// TestAdoptRefusesBadMappings: errors name the configuration key, before anything changes.
func TestAdoptRefusesBadMappings(t *testing.T) {
	forEachAdoptDialect(t, testAdoptRefusesBadMappings)
}

func testAdoptRefusesBadMappings(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	typeName := map[outbox.Dialect]string{outbox.Postgres: "character varying(100)", outbox.MySQL: "varchar(100)"}[d]
	missing := "Payload" // PostgreSQL's column names are case-sensitive
	if d == outbox.MySQL {
		missing = "body" // MariaDB/MySQL's are not: "Payload" is the payload column there
	}
	for _, tc := range []struct {
		edit func(*outbox.AdoptConfig)
		want string
	}{
		{func(c *outbox.AdoptConfig) { c.Columns.EventID = "" }, "columns.event_id is required"},
		{func(c *outbox.AdoptConfig) { c.Columns.Payload = missing }, fmt.Sprintf("columns.payload %q: table", missing)},
		{func(c *outbox.AdoptConfig) { c.Columns.RetryCount = "event_type" }, `columns.retry_count "event_type" is of type ` + typeName},
		{func(c *outbox.AdoptConfig) { c.Columns.CreatedAt = "status" }, `columns.created_at "status" is of type`},
		{func(c *outbox.AdoptConfig) { c.TopicTemplate = "{aggregate_typ|lower}.events" }, `topic_template {aggregate_typ} "aggregate_typ": table`},
		{func(c *outbox.AdoptConfig) { c.TopicTemplate = "{aggregate_type} events" }, "topic_template"},
		{func(c *outbox.AdoptConfig) { c.Columns.Topic = "event_type" }, "both set"},
		{func(c *outbox.AdoptConfig) { c.Status.Published = "PUBLISHED'; DROP" }, "status.published"},
		{func(c *outbox.AdoptConfig) { c.Status.Failed = "FAILED_AFTER_ALL_RETRIES_X" }, "longer than columns.status"},
		{func(c *outbox.AdoptConfig) { c.Table = "OUTBOX_EVENTS" }, "does not exist"},
	} {
		cfg := a.cfg
		tc.edit(&cfg)
		_, err := outbox.Adopt(ctx, a.db, a.relay, cfg)
		if !errors.Is(err, outbox.ErrInvalidAdoptConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Adopt(%+v): %v; want ErrInvalidAdoptConfig naming %q", cfg, err, tc.want)
		}
	}
	if a.relayExists(t) {
		t.Errorf("relay table %s after refused adoptions; want none created", a.relay)
	}
}

// TestAdoptedPoisonEventEndsFailed: an event the broker keeps refusing ends FAILED in the team's
// table after the configured attempts, with retry_count set; a replay makes it PENDING again.
func TestAdoptedPoisonEventEndsFailed(t *testing.T) {
	forEachAdoptDialect(t, testAdoptedPoisonEventEndsFailed)
}

func testAdoptedPoisonEventEndsFailed(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	id, err := a.insert(ctx, a.db, "Poison", "p-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	runForwarder(t, a, failingPublisher{}, func() bool {
		return a.statuses(t)["FAILED"] == 1
	})
	var retries int
	var next sql.NullTime
	if err := a.db.QueryRow("SELECT retry_count, next_retry_at FROM "+a.team).Scan(&retries, &next); err != nil {
		t.Fatal(err)
	}
	if retries != 3 || next.Valid {
		t.Errorf("retry_count %d, next_retry_at %v; want 3 (MaxAttempts) and NULL", retries, next)
	}
	// An operator's replay (outboxkit dead-letters replay) makes the team's row pending again.
	adm, err := admin.New(a.db, a.dialect, a.relay.Events())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := adm.Replay(ctx, uuid.MustParse(id)); err != nil || n != 1 {
		t.Fatalf("Replay: %d, %v", n, err)
	}
	if got := a.statuses(t); got["PENDING"] != 1 || len(got) != 1 {
		t.Errorf("team rows after replay: %v, want the one PENDING", got)
	}
	if err := a.db.QueryRow("SELECT retry_count FROM " + a.team).Scan(&retries); err != nil || retries != 0 {
		t.Errorf("retry_count after replay: %d, %v; want 0", retries, err)
	}
}

// TestAdoptedTableNeedsNoNewRightsForWriters: a writer allowed only to INSERT into the team's
// table still gets its events copied (PostgreSQL: the adoption's functions are SECURITY
// DEFINER; MariaDB/MySQL: triggers run with their definer's rights).
func TestAdoptedTableNeedsNoNewRightsForWriters(t *testing.T) {
	forEachAdoptDialect(t, testAdoptedTableNeedsNoNewRightsForWriters)
}

func testAdoptedTableNeedsNoNewRightsForWriters(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	role := testsupport.UniqueName("adopt_writer")
	writer := openWriterWithInsertOnly(t, a, role)
	if _, err := writer.ExecContext(ctx, a.q("INSERT INTO "+a.team+" (id, aggregate_id, aggregate_type, event_type, payload) VALUES (?, 'o-1', 'Order', 'OrderCreated', '{}')"),
		uuid.NewString()); err != nil {
		t.Fatalf("INSERT by a writer with only INSERT on the team's table: %v", err)
	}
	if n := a.relayRows(t); n != 1 {
		t.Errorf("%d rows in the relay table, want 1", n)
	}
}

// TestAdoptTextIDs: ids held as text (PostgreSQL: CHAR(36); MariaDB/MySQL: an ASCII VARCHAR with
// a case-sensitive collation, another character set than the relay table's), in lower or upper
// case, are relayed under their UUID and their rows marked when the relay acknowledges them
// (here by the relay's own statement: the pending row deleted).
func TestAdoptTextIDs(t *testing.T) {
	forEachAdoptDialect(t, testAdoptTextIDs)
}

func testAdoptTextIDs(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	alter := "ALTER TABLE " + a.team + " ALTER COLUMN id DROP DEFAULT, ALTER COLUMN id TYPE CHAR(36)"
	if d == outbox.MySQL {
		alter = "ALTER TABLE " + a.team + " MODIFY id VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"
	}
	if _, err := a.db.Exec(alter); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	ids := []string{uuid.NewString(), strings.ToUpper(uuid.NewString())}
	for _, id := range ids {
		if _, err := a.db.Exec(a.q("INSERT INTO "+a.team+" (id, aggregate_id, aggregate_type, event_type, payload) VALUES (?, 'o-1', 'Order', 'OrderCreated', '{}')"), id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.db.Exec("DELETE FROM " + a.relay.Events() + " WHERE status = 0"); err != nil {
		t.Fatal(err)
	}
	if got := a.statuses(t); got["PUBLISHED+at"] != 2 {
		t.Errorf("team rows %v, want both PUBLISHED with published_at", got)
	}
}

// TestAdoptAgainWithAnotherMapping: adopting again with another mapping replaces the triggers
// (PostgreSQL: in the adoption's transaction; MariaDB/MySQL: dropped and created under the
// adoption's LOCK TABLES), copies none of the rows already copied, and the next event follows the
// new mapping; a third run with the same mapping changes nothing.
func TestAdoptAgainWithAnotherMapping(t *testing.T) {
	forEachAdoptDialect(t, testAdoptAgainWithAnotherMapping)
}

func testAdoptAgainWithAnotherMapping(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := a.insert(ctx, a.db, "Order", "o-1", 1); err != nil {
		t.Fatal(err)
	}
	cfg := a.cfg
	cfg.TopicTemplate = "{aggregate_type|lower}.v2"
	if res, err := outbox.Adopt(ctx, a.db, a.relay, cfg); err != nil || !res.Changed || res.Backfilled != 0 {
		t.Fatalf("Adopt with another topic template: %+v, %v; want the triggers changed and nothing backfilled", res, err)
	}
	if _, err := a.insert(ctx, a.db, "Order", "o-1", 2); err != nil {
		t.Fatal(err)
	}
	if res, err := outbox.Adopt(ctx, a.db, a.relay, cfg); err != nil || res.Changed || res.Backfilled != 0 {
		t.Fatalf("Adopt again with the same mapping: %+v, %v; want nothing changed", res, err)
	}
	rows, err := a.db.Query("SELECT topic FROM " + a.relay.Events() + " ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var topics []string
	for rows.Next() {
		var topic string
		if err := rows.Scan(&topic); err != nil {
			t.Fatal(err)
		}
		topics = append(topics, topic)
	}
	if strings.Join(topics, " ") != "order.events order.v2" {
		t.Errorf("relayed topics %v, want [order.events order.v2]", topics)
	}
}

// TestAdoptRefusesSQLite: SQLite has no trigger that could take a copy's key lock; adopting
// there is refused before anything runs, naming the databases that are supported.
func TestAdoptRefusesSQLite(t *testing.T) {
	relay, err := outbox.NewTable(outbox.SQLite, "outbox_events_relay")
	if err != nil {
		t.Fatal(err)
	}
	_, err = outbox.PlanAdopt(context.Background(), nil, relay, seed004Mapping)
	if !errors.Is(err, outbox.ErrInvalidAdoptConfig) || !strings.Contains(err.Error(), "PostgreSQL and MariaDB/MySQL, not sqlite") {
		t.Errorf("PlanAdopt on SQLite: %v", err)
	}
	if _, err := outbox.UnadoptStatements(relay, seed004Mapping, false); !errors.Is(err, outbox.ErrInvalidAdoptConfig) {
		t.Errorf("UnadoptStatements on SQLite: %v", err)
	}
}
